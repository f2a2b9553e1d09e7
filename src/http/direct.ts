import type net from 'node:net';
import type { Context } from 'koa';

/** A process writing a response body, as streamGit gives it. */
export interface BodyWriter {
  done: Promise<void>;
  kill(): void;
}

/**
 * The client's connection, when a child process may write a response body into it directly: a
 * plain HTTP/1.x socket (no TLS) whose current response is this one and has not started. GET
 * only (a HEAD answer has no body). Null otherwise: the caller streams the body itself.
 */
export function directSocket(ctx: Context): net.Socket | null {
  const socket = ctx.req.socket as net.Socket & { encrypted?: boolean; _handle?: unknown; _httpMessage?: unknown };
  if (ctx.method !== 'GET' || ctx.req.httpVersionMajor !== 1) return null;
  if (socket.encrypted || !socket._handle || socket.destroyed || socket._httpMessage !== ctx.res) return null;
  return ctx.res.headersSent ? null : socket;
}

/**
 * Answers 200 with the headers set on `ctx` (Content-Length included) and a body that `start`'s
 * process writes straight into the socket: the bytes never pass through this process. The
 * headers are in the kernel before the process starts; the response ends when it exits. If it
 * fails part-way, the connection is closed (the client sees a short body, as with any stream
 * that breaks after its headers).
 */
export async function sendDirect(
  ctx: Context,
  socket: net.Socket,
  start: (socket: net.Socket) => BodyWriter,
): Promise<void> {
  ctx.status = 200;
  ctx.respond = false;
  ctx.res.flushHeaders();
  // Writes are ordered: this callback runs once the headers have been handed to the kernel.
  const flushed = await new Promise<boolean>((resolve) => socket.write('', (error) => resolve(!error)));
  if (!flushed || socket.destroyed) return void socket.destroy();
  const writer = start(socket);
  const stop = () => writer.kill();
  socket.once('close', stop);
  try {
    await writer.done;
    ctx.res.end();
  } catch (error) {
    ctx.state.log?.debug({ err: error }, 'direct response body failed');
    socket.destroy();
  } finally {
    socket.off('close', stop);
  }
}
