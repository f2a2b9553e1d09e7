import type { Db } from '../../db/database.js';
import { Validation } from '../errors.js';
import { advisoryName, isAffected, type OsvAffected } from './versions.js';

/**
 * Security advisories in the OSV format (https://ossf.github.io/osv-schema/), imported by an
 * administrator, matched against dependency versions by each ecosystem's rules.
 */

const SEVERITIES: Record<string, string> = {
  critical: 'critical',
  high: 'high',
  moderate: 'medium',
  medium: 'medium',
  low: 'low',
  info: 'info',
  informational: 'info',
};

interface OsvRecord {
  id?: unknown;
  summary?: unknown;
  details?: unknown;
  modified?: unknown;
  withdrawn?: unknown;
  affected?: unknown;
  database_specific?: { severity?: unknown };
  severity?: { type?: unknown; score?: unknown }[];
}

/** GitLab's severity for an advisory: the database's own word, else a CVSS base score when one is given as a number. */
function severityOf(record: OsvRecord): string {
  const word = record.database_specific?.severity;
  if (typeof word === 'string' && SEVERITIES[word.toLowerCase()]) return SEVERITIES[word.toLowerCase()] as string;
  for (const entry of record.severity ?? []) {
    const score = typeof entry.score === 'string' ? Number(entry.score) : Number.NaN;
    if (Number.isFinite(score)) {
      if (score >= 9) return 'critical';
      if (score >= 7) return 'high';
      if (score >= 4) return 'medium';
      if (score > 0) return 'low';
      return 'info';
    }
  }
  return 'unknown';
}

const date = (value: unknown): Date | null => {
  if (typeof value !== 'string') return null;
  const parsed = new Date(value);
  return Number.isNaN(parsed.getTime()) ? null : parsed;
};

/** OSV records from a file: one JSON record, a JSON array of them, or one record per line. */
export function parseAdvisoryText(source: string): unknown[] {
  const trimmed = source.trim();
  if (trimmed === '') return [];
  try {
    const parsed = JSON.parse(trimmed) as unknown;
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    return trimmed
      .split(/\r?\n/)
      .filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as unknown);
  }
}

export interface ImportResult {
  imported: number;
  skipped: number;
}

/**
 * Stores OSV records (one per package they name; a newer `modified` replaces an older copy).
 * A value that is not an OSV record at all is a 400; records naming no package Depot reads are
 * counted as skipped.
 */
export async function importAdvisories(db: Db, records: unknown[]): Promise<ImportResult> {
  const rows: {
    osv_id: string;
    ecosystem: string;
    package_name: string;
    summary: string | null;
    severity: string;
    affected: string;
    modified_at: Date | null;
    withdrawn_at: Date | null;
  }[] = [];
  let skipped = 0;
  records.forEach((value, index) => {
    const record = value as OsvRecord;
    if (!record || typeof record !== 'object' || typeof record.id !== 'string' || !Array.isArray(record.affected)) {
      new Validation()
        .add('advisories', `entry ${index} is not an OSV record (id and affected are required)`)
        .throwIfAny();
    }
    const byPackage = new Map<string, { ecosystem: string; name: string; affected: OsvAffected[] }>();
    for (const entry of record.affected as OsvAffected[]) {
      const ecosystem = entry?.package?.ecosystem;
      const name = entry?.package?.name;
      if (typeof ecosystem !== 'string' || typeof name !== 'string') continue;
      const baseEcosystem = ecosystem.split(':')[0] as string;
      const key = `${baseEcosystem}\0${advisoryName(baseEcosystem, name)}`;
      const group = byPackage.get(key) ?? {
        ecosystem: baseEcosystem,
        name: advisoryName(baseEcosystem, name),
        affected: [],
      };
      group.affected.push(entry);
      byPackage.set(key, group);
    }
    if (byPackage.size === 0) skipped++;
    for (const group of byPackage.values()) {
      rows.push({
        osv_id: record.id as string,
        ecosystem: group.ecosystem,
        package_name: group.name,
        summary: typeof record.summary === 'string' ? record.summary : null,
        severity: severityOf(record),
        affected: JSON.stringify(group.affected),
        modified_at: date(record.modified),
        withdrawn_at: date(record.withdrawn),
      });
    }
  });
  for (let i = 0; i < rows.length; i += 500) {
    await db
      .insertInto('security_advisories')
      .values(rows.slice(i, i + 500))
      .onConflict((oc) =>
        oc.columns(['osv_id', 'ecosystem', 'package_name']).doUpdateSet((eb) => ({
          summary: eb.ref('excluded.summary'),
          severity: eb.ref('excluded.severity'),
          affected: eb.ref('excluded.affected'),
          modified_at: eb.ref('excluded.modified_at'),
          withdrawn_at: eb.ref('excluded.withdrawn_at'),
        })),
      )
      .execute();
  }
  return { imported: records.length - skipped, skipped };
}

export interface MatchedVulnerability {
  name: string;
  severity: string;
}

export interface PackageVersion {
  ecosystem: string;
  name: string;
  version: string;
}

/** The advisories affecting each given package version (keyed `ecosystem\0name\0version`). */
export async function matchAdvisories(
  db: Db,
  packages: PackageVersion[],
): Promise<Map<string, MatchedVulnerability[]>> {
  const result = new Map<string, MatchedVulnerability[]>();
  if (packages.length === 0) return result;
  const wanted = packages.map((p) => ({ ...p, advisoryName: advisoryName(p.ecosystem, p.name) }));
  const rows = await db
    .selectFrom('security_advisories')
    .select(['osv_id', 'ecosystem', 'package_name', 'summary', 'severity', 'affected'])
    .where('withdrawn_at', 'is', null)
    .where((eb) =>
      eb.or(wanted.map((p) => eb.and([eb('ecosystem', '=', p.ecosystem), eb('package_name', '=', p.advisoryName)]))),
    )
    .orderBy('osv_id')
    .execute();
  for (const p of wanted) {
    const key = `${p.ecosystem}\0${p.name}\0${p.version}`;
    const matched = rows
      .filter((row) => row.ecosystem === p.ecosystem && row.package_name === p.advisoryName)
      .filter((row) => (row.affected as unknown as OsvAffected[]).some((a) => isAffected(p.ecosystem, p.version, a)))
      .map((row) => ({ name: row.summary ?? row.osv_id, severity: row.severity }));
    result.set(key, matched);
  }
  return result;
}
