import type { Logger } from 'pino';
import type { Job } from '../db/schema.js';
import type { Deps } from '../services/deps.js';
import {
  claimJob,
  deleteJob,
  finishJob,
  heartbeatJob,
  releaseDeadWorkers,
  requeueJob,
  workerIdentity,
} from './queue.js';

/** What a job handler gets besides its payload. */
export interface JobContext {
  deps: Deps;
  job: Job;
  /** 1 for the first run; a job re-run after a crash sees a higher number. */
  attempt: number;
  log: Logger;
  /** Aborted when the worker stops: a handler should stop at its next safe point. */
  signal: AbortSignal;
}

/** One kind of job. `run` must be idempotent: a job may run again after a crash. */
export interface JobKind {
  kind: string;
  run(ctx: JobContext): Promise<void>;
  /** Called instead of `run` once the attempts are used up (and after the last failure). */
  giveUp?(ctx: JobContext, reason: string): Promise<void>;
  /** Done jobs of this kind are deleted rather than kept (frequent upkeep, nothing to look back on). */
  forgetDone?: boolean;
  /**
   * Runs when a worker starts (and before `drain({ recover: true })`): re-queues work of this
   * kind that lost its job row, so nothing waits forever. Returns how many jobs it queued.
   */
  recover?(deps: Deps): Promise<number>;
}

export class JobInterrupted extends Error {
  constructor() {
    super('interrupted by shutdown');
  }
}

export interface WorkerOptions {
  /** How many jobs run at once in this process. */
  concurrency?: number;
  pollIntervalMs?: number;
  heartbeatIntervalMs?: number;
  /** This process alone uses the database (embedded PGlite): every running job is an orphan. */
  exclusive?: boolean;
}

const RETRY_BASE_SECONDS = 5;

/**
 * Runs jobs from the queue: polls, claims with SKIP LOCKED, keeps the lease alive while a job
 * runs, retries failures with a back-off, gives up after `max_attempts`. `start()` for the
 * server, `drain()` for tests and the CLI (runs until nothing is left).
 */
/** The workers started in this process, for wakeWorkers(). */
const liveWorkers = new Set<Worker>();

/**
 * Asks this process's workers to look for jobs now instead of at their next poll: for work a user
 * waits to see (a push's pipeline). Other processes still find it at their next poll.
 */
export function wakeWorkers(): void {
  for (const worker of liveWorkers) worker.wake();
}

export class Worker {
  readonly id = workerIdentity();
  private woken = false;
  private readonly kinds = new Map<string, JobKind>();
  private readonly running = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private polling = false;

  constructor(
    private readonly deps: Deps,
    kinds: JobKind[],
    private readonly options: WorkerOptions = {},
  ) {
    for (const kind of kinds) this.kinds.set(kind.kind, kind);
  }

  /** Releases orphaned jobs, then polls until stopped. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    liveWorkers.add(this);
    const released = await releaseDeadWorkers(this.deps.db, this.id, this.options.exclusive ?? false);
    if (released > 0) this.deps.logger.info({ released }, 'jobs of a stopped worker are queued again');
    await this.recover();
    this.schedule(0);
  }

  private async recover(): Promise<void> {
    for (const kind of this.kinds.values()) {
      const queued = await kind.recover?.(this.deps);
      if (queued) this.deps.logger.warn({ kind: kind.kind, queued }, 'queued work that had lost its job');
    }
  }

  /** Stops claiming, asks running jobs to stop, waits for them up to `timeoutMs`. */
  async stop(timeoutMs = 10_000): Promise<void> {
    this.started = false;
    liveWorkers.delete(this);
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    const all = Promise.allSettled([...this.running]);
    await Promise.race([all, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  /** Runs jobs until none is runnable (tests, the CLI). Returns how many ran. */
  async drain(options: { releaseOrphans?: boolean; recover?: boolean } = {}): Promise<number> {
    if (options.releaseOrphans) await releaseDeadWorkers(this.deps.db, this.id, this.options.exclusive ?? false);
    if (options.recover) await this.recover();
    let count = 0;
    for (;;) {
      const job = await claimJob(this.deps.db, [...this.kinds.keys()], this.id);
      if (!job) return count;
      const outcome = await this.runJob(job);
      count += 1;
      // An interrupted job is queued again at once: claiming it here would never end.
      if (outcome === 'interrupted') return count;
    }
  }

  /** Polls at once (or right after the poll under way). */
  wake(): void {
    if (!this.started) return;
    if (this.polling) {
      this.woken = true;
      return;
    }
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (!this.started) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.poll(), delayMs);
    this.timer.unref?.();
  }

  private async poll(): Promise<void> {
    if (this.polling || !this.started) return;
    this.polling = true;
    try {
      const limit = this.options.concurrency ?? 2;
      while (this.started && this.running.size < limit) {
        const job = await claimJob(this.deps.db, [...this.kinds.keys()], this.id);
        if (!job) break;
        const run: Promise<void> = this.runJob(job).then(
          () => {
            this.running.delete(run);
            this.schedule(0);
          },
          (error: unknown) => {
            this.running.delete(run);
            this.deps.logger.error({ err: error, job: job.id }, 'job bookkeeping failed');
            this.schedule(0);
          },
        );
        this.running.add(run);
      }
    } catch (error) {
      this.deps.logger.error({ err: error }, 'job queue poll failed');
    } finally {
      this.polling = false;
      this.schedule(this.woken ? 0 : (this.options.pollIntervalMs ?? 1000));
      this.woken = false;
    }
  }

  private async runJob(job: Job): Promise<'done' | 'failed' | 'interrupted'> {
    const kind = this.kinds.get(job.kind);
    const log = this.deps.logger.child({ job: job.id, kind: job.kind, attempt: job.attempts });
    if (!kind) return 'failed';
    const ctx: JobContext = { deps: this.deps, job, attempt: job.attempts, log, signal: this.abort.signal };
    const beat = setInterval(
      () => void heartbeatJob(this.deps.db, job.id, this.id).catch(() => {}),
      this.options.heartbeatIntervalMs ?? 5000,
    );
    beat.unref?.();
    try {
      if (job.attempts > job.max_attempts) {
        log.warn('job attempts used up');
        await kind.giveUp?.(ctx, `gave up after ${job.max_attempts} attempts`);
        await finishJob(this.deps.db, job.id, this.id, 'failed', 'attempts used up');
        return 'failed';
      }
      await kind.run(ctx);
      if (kind.forgetDone) await deleteJob(this.deps.db, job.id, this.id);
      else await finishJob(this.deps.db, job.id, this.id, 'done');
      return 'done';
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof JobInterrupted) {
        log.info('job interrupted by shutdown; it runs again at the next start');
        await requeueJob(this.deps.db, job.id, this.id, new Date(), { refundAttempt: true }).catch(() => {});
        return 'interrupted';
      }
      if (job.attempts < job.max_attempts) {
        log.warn({ err: error }, 'job failed; retrying');
        const delay = RETRY_BASE_SECONDS * job.attempts ** 2 * 1000;
        await requeueJob(this.deps.db, job.id, this.id, new Date(Date.now() + delay), { error: message });
      } else {
        log.error({ err: error }, 'job failed for good');
        await kind.giveUp?.(ctx, message).catch((e: unknown) => log.error({ err: e }, 'giving up failed'));
        await finishJob(this.deps.db, job.id, this.id, 'failed', message);
      }
      return 'failed';
    } finally {
      clearInterval(beat);
    }
  }
}
