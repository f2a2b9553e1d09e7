// The process spawner: a small Node process that starts git (and bzip2) on the server's behalf.
//
// fork() copies the page tables of the process that calls it, and the server holds PGlite's
// ~800 MiB, so a spawn there blocks its event loop for 20 to 70 ms; from this process it takes
// ~4 ms, and none of the server's. Plain JavaScript with no imports beyond Node's, so it starts in
// milliseconds under any loader (tsx, vitest, compiled dist).
//
// The spawner starts a child and hands the child's stdin and stdout pipes to the server over the
// IPC channel (SCM_RIGHTS), then drops its own copies: the server reads and writes git's pipes
// itself, so bulk bytes (archives, blobs, packs) never pass through this process.
//
// Messages, JSON over the IPC channel. Server → spawner:
//   {op: 'start', id, argv, env, input?, output?}
//                                         input: base64 text written to stdin and closed; without
//                                         it, stdin is handed over; '' means no stdin at all.
//                                         output: true when the message carries, as its handle,
//                                         the socket the child gets as fd 3 (a client's
//                                         connection); it is closed here once the child has it
//   {op: 'kill', id}
// Spawner → server:
//   {op: 'stdio', id, fd: 0 | 1, pid}     with the pipe as the handle
//   {op: 'stderr', id, data}              base64
//   {op: 'exit', id, code, signal}
//   {op: 'error', id, code, message}      the child could not be started
import { spawn } from 'node:child_process';

const children = new Map();
// With a callback, a send on a closed channel (the server is gone) is not an error event.
const send = (message, handle) => process.connected && process.send(message, handle, undefined, () => {});

/** Hands a pipe to the server; the handle is closed here once the server has it. */
function handOver(id, fd, pid, socket) {
  // A socket created by spawn() is already reading: stop it in this same tick, before the event
  // loop can read bytes here that would then be lost.
  socket._handle?.readStop();
  send({ op: 'stdio', id, fd, pid }, socket);
}

function start({ id, argv, env, input, output }, handle) {
  if (output && !handle) return send({ op: 'error', id, code: 'EBADF', message: 'no output socket' });
  let child;
  try {
    // An output socket goes in as fd 3 (see launch() for why); the child has no stdout of its own.
    const stdio = [input === '' ? 'ignore' : 'pipe', output ? 'ignore' : 'pipe', 'pipe', ...(output ? [handle] : [])];
    child = spawn(argv[0], argv.slice(1), { env, stdio });
  } catch (error) {
    return send({ op: 'error', id, code: error.code, message: error.message });
  } finally {
    // The child holds its own copy of the socket now (or never will): this one is not read here.
    if (output) handle.close();
  }
  let stopped = false;
  const stop = (message) => {
    if (stopped) return;
    stopped = true;
    children.delete(id);
    send(message);
  };
  children.set(id, child);
  child.on('error', (error) => stop({ op: 'error', id, code: error.code, message: error.message }));
  if (child.pid === undefined) return; // `error` follows
  if (input === undefined) handOver(id, 0, child.pid, child.stdin);
  else if (input !== '') child.stdin.on('error', () => {}).end(Buffer.from(input, 'base64'));
  if (!output) handOver(id, 1, child.pid, child.stdout);
  child.stderr.on('data', (chunk) => send({ op: 'stderr', id, data: chunk.toString('base64') }));
  // `exit`, not `close`: the stdout pipe lives in the server now and never closes here. stderr
  // may still hold a last chunk at exit; read it out first so it arrives before the exit.
  child.on('exit', (code, signal) => {
    const finish = () => stop({ op: 'exit', id, code, signal });
    if (child.stderr.readableEnded || child.stderr.destroyed) finish();
    else child.stderr.once('close', finish);
  });
}

process.on('message', (message, handle) => {
  if (message.op === 'start') start(message, handle);
  else if (message.op === 'kill') children.get(message.id)?.kill('SIGKILL');
});
send('ready');
// The spawner lives exactly as long as the server: when the IPC channel closes, it stops what it
// started and exits.
process.on('disconnect', () => {
  for (const child of children.values()) child.kill('SIGKILL');
  process.exit(0);
});
