/** Prints bench/results/*.json as the Markdown table kept in bench/README.md (`npx tsx bench/table.ts`). */
import fs from 'node:fs';
import path from 'node:path';
import { type BenchResult, RESULTS_DIR } from './harness.js';

const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));
const rows = ['| benchmark | measure | Depot | baseline | ratio | goal |', '|---|---|---|---|---|---|'];
const runs: string[] = [];
for (const file of fs
  .readdirSync(RESULTS_DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()) {
  const result = JSON.parse(fs.readFileSync(path.join(RESULTS_DIR, file), 'utf8')) as BenchResult;
  runs.push(
    `${result.benchmark}: ${result.date.slice(0, 16).replace('T', ' ')} UTC, ${result.machine.cpus} × ${result.machine.cpuModel}, Node ${result.machine.node}`,
  );
  for (const m of result.measurements) {
    rows.push(
      `| ${result.benchmark} | ${m.name} | ${fmt(m.subject)} ${m.unit} | ${m.baselineName}: ${fmt(m.baseline)} ${m.unit} | ${m.ratio.toFixed(2)}× (${m.better} is better) | ${m.goal ?? '—'} |`,
    );
  }
}
process.stdout.write(`${rows.join('\n')}\n\nMeasured on: ${runs.join('; ')}.\n`);
