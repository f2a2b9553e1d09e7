import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimJob, enqueueJob, releaseDeadWorkers } from '../../src/jobs/queue.js';
import { type JobContext, JobInterrupted, type JobKind, Worker } from '../../src/jobs/worker.js';
import { startTestApp, type TestApp } from '../support/app.js';

/** The job queue on a real database: claims, retries, giving up, orphans of dead workers. */
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});

afterAll(async () => {
  await app?.close();
});

const jobRow = (id: number) =>
  app.deps.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

describe('job queue', () => {
  it('hands each job to exactly one of several concurrent claimers', async () => {
    const kind = `claim-${Date.now()}`;
    const ids = new Set<number>();
    for (let i = 0; i < 12; i++) ids.add((await enqueueJob(app.deps.db, kind, { i })).id);
    const claimed: number[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (;;) {
          const job = await claimJob(app.deps.db, [kind], `host:${w}:x`);
          if (!job) return;
          claimed.push(job.id);
        }
      }),
    );
    expect(claimed.sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(claimed).size).toBe(claimed.length);
  });

  it('retries a failing job with a back-off, then gives up and tells the kind', async () => {
    const runs: number[] = [];
    const gaveUp: string[] = [];
    const kind: JobKind = {
      kind: `failing-${Date.now()}`,
      async run(ctx: JobContext) {
        runs.push(ctx.attempt);
        throw new Error(`boom ${ctx.attempt}`);
      },
      async giveUp(_ctx, reason) {
        gaveUp.push(reason);
      },
    };
    const worker = new Worker(app.deps, [kind]);
    const job = await enqueueJob(app.deps.db, kind.kind, {}, { maxAttempts: 2 });
    expect(await worker.drain()).toBe(1);
    let row = await jobRow(job.id);
    expect(row).toMatchObject({ state: 'queued', attempts: 1, last_error: 'boom 1', locked_by: null });
    expect(row.run_at.getTime()).toBeGreaterThan(Date.now());
    // Not due yet: nothing to run.
    expect(await worker.drain()).toBe(0);
    await app.deps.db
      .updateTable('jobs')
      .set({ run_at: new Date(0) })
      .where('id', '=', job.id)
      .execute();
    expect(await worker.drain()).toBe(1);
    row = await jobRow(job.id);
    expect(row).toMatchObject({ state: 'failed', attempts: 2, last_error: 'boom 2' });
    expect(row.finished_at).not.toBeNull();
    expect(runs).toEqual([1, 2]);
    expect(gaveUp).toEqual(['boom 2']);
  });

  it('puts an interrupted job back without counting the attempt', async () => {
    const kind: JobKind = {
      kind: `interrupted-${Date.now()}`,
      async run() {
        throw new JobInterrupted();
      },
    };
    const job = await enqueueJob(app.deps.db, kind.kind, {});
    await new Worker(app.deps, [kind]).drain();
    expect(await jobRow(job.id)).toMatchObject({ state: 'queued', attempts: 0, locked_by: null });
  });

  it('takes back jobs of a dead worker at once, and of a live one only after the lease', async () => {
    const kind: JobKind = { kind: `orphan-${Date.now()}`, async run() {} };
    const dead = await enqueueJob(app.deps.db, kind.kind, {});
    const alive = await enqueueJob(app.deps.db, kind.kind, {});
    const worker = new Worker(app.deps, [kind]);
    const [host] = worker.id.split(':');
    // A process id that cannot exist, and this very process (alive) under another nonce.
    await app.deps.db
      .updateTable('jobs')
      .set({ state: 'running', locked_by: `${host}:2147483646:gone`, heartbeat_at: new Date() })
      .where('id', '=', dead.id)
      .execute();
    await app.deps.db
      .updateTable('jobs')
      .set({ state: 'running', locked_by: `otherhost:${process.pid}:n`, heartbeat_at: new Date() })
      .where('id', '=', alive.id)
      .execute();
    expect(await releaseDeadWorkers(app.deps.db, worker.id, false)).toBe(1);
    expect(await worker.drain()).toBe(1);
    expect((await jobRow(dead.id)).state).toBe('done');
    expect((await jobRow(alive.id)).state).toBe('running');
    // Its heartbeat stops: past the lease anyone may claim it.
    await app.deps.db
      .updateTable('jobs')
      .set({ heartbeat_at: new Date(Date.now() - 3600_000) })
      .where('id', '=', alive.id)
      .execute();
    expect(await worker.drain()).toBe(1);
    expect(await jobRow(alive.id)).toMatchObject({ state: 'done', attempts: 1 });
  });

  it('runs jobs in the background once started, and stops cleanly', async () => {
    const done: number[] = [];
    const kind: JobKind = {
      kind: `background-${Date.now()}`,
      async run(ctx) {
        done.push(Number(ctx.job.payload.n));
      },
    };
    const worker = new Worker(app.deps, [kind], { pollIntervalMs: 20 });
    await worker.start();
    for (let n = 0; n < 3; n++) await enqueueJob(app.deps.db, kind.kind, { n });
    const deadline = Date.now() + 10_000;
    while (done.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await worker.stop();
    expect(done.sort()).toEqual([0, 1, 2]);
  });
});
