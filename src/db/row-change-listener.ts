import pg from 'pg';
import type { LookupCache } from './lookup-cache.js';

export const ROW_CHANGE_CHANNEL = 'depot_row_change';
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

export interface RowChangeListener {
  /** Resolves once LISTEN is in place (the cache keeps entries only from then on). */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Keeps a connection of its own LISTENing on `depot_row_change` and empties what each notice
 * names from `cache`. While it is not listening (before the first connection, after a lost one)
 * the cache keeps nothing; it reconnects with a growing pause.
 */
export function listenForRowChanges(url: string, cache: LookupCache): RowChangeListener {
  let client: pg.Client | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let pause = RECONNECT_MIN_MS;
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  cache.setLive(false);

  const lost = (lostClient: pg.Client) => {
    if (client !== lostClient) return;
    client = undefined;
    cache.setLive(false);
    lostClient.end().catch(() => {});
    if (closed) return;
    timer = setTimeout(connect, pause);
    timer.unref();
    pause = Math.min(pause * 2, RECONNECT_MAX_MS);
  };

  const connect = async () => {
    const next = new pg.Client({ connectionString: url });
    client = next;
    next.on('notification', (message) => cache.invalidate(message.payload));
    next.on('error', () => lost(next));
    next.on('end', () => lost(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${ROW_CHANGE_CHANNEL}`);
    } catch {
      lost(next);
      return;
    }
    if (closed || client !== next) return;
    pause = RECONNECT_MIN_MS;
    cache.setLive(true);
    markReady();
  };

  void connect();
  return {
    ready,
    close: async () => {
      closed = true;
      if (timer) clearTimeout(timer);
      const current = client;
      client = undefined;
      cache.setLive(false);
      await current?.end().catch(() => {});
    },
  };
}
