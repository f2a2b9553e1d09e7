import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** The Prometheus metrics of one app instance (own registry, so tests can run several). */
export class Metrics {
  readonly registry = new Registry();
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly duration: Histogram<'method' | 'route'>;
  /** Gauges other modules register (job queue depth, storage moves). */
  readonly gauges = new Map<string, Gauge<string>>();

  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'depot_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.duration = new Histogram({
      name: 'depot_http_request_duration_seconds',
      help: 'HTTP request latency by route',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [this.registry],
    });
  }

  /** A gauge whose value is read when metrics are scraped. */
  addGauge(name: string, help: string, labelNames: string[], collect: (g: Gauge<string>) => Promise<void>): void {
    const gauge = new Gauge({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        await collect(this);
      },
    });
    this.gauges.set(name, gauge);
  }
}
