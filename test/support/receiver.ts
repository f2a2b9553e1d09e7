import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body parsed as JSON, or undefined. */
  json: any;
}

export interface Receiver {
  url: string;
  port: number;
  requests: Received[];
  /** The status the next requests get (200 by default). */
  status: number;
  close(): Promise<void>;
}

/**
 * An HTTP server on loopback that records every request it gets (webhooks, chat, build
 * triggers); with `tls` (a key and certificate) an https one.
 */
export async function startReceiver(tls?: { key: Buffer; cert: Buffer }): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    port: 0,
    requests: [],
    status: 200,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const handler: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = body ? JSON.parse(body) : undefined;
      } catch {
        json = undefined;
      }
      receiver.requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json });
      res.statusCode = receiver.status;
      res.end(receiver.status < 300 ? 'ok' : 'failed');
    });
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `${tls ? 'https' : 'http'}://127.0.0.1:${receiver.port}`;
  return receiver;
}
