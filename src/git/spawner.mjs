// The process spawner: a small Node process that starts git on the server's behalf.
//
// fork() copies the page tables of the process that calls it, and the server holds PGlite's
// ~800 MiB, so a spawn there takes ~19 ms of its event loop; from this process it takes ~4 ms,
// and none of the server's. Plain JavaScript with no imports beyond Node's, so it starts in
// milliseconds under any loader (tsx, vitest, compiled dist).
//
// Protocol, one Unix-socket connection per child: frames of [type: u8][length: u32 BE][payload].
// Server → spawner: 1 start {argv, env} (JSON), 2 stdin data, 3 stdin end, 4 kill.
// Spawner → server: 5 stdout data, 6 stderr data, 7 exit {code, signal} (JSON), 8 spawn error
// {code, message} (JSON). The spawner pauses git's stdout when the socket is full, and the socket
// when git's stdin is full, so back-pressure holds end to end.
import { spawn } from 'node:child_process';
import net from 'node:net';

const socketPath = process.argv[2];

function frame(type, payload) {
  const header = Buffer.alloc(5);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

function serve(socket) {
  let buffer = Buffer.alloc(0);
  let child = null;
  let exited = false;
  const send = (type, payload) => socket.write(frame(type, payload));
  const onFrame = (type, payload) => {
    if (type === 1 && !child) {
      const { argv, env } = JSON.parse(payload.toString('utf8'));
      child = spawn(argv[0], argv.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe'] });
      child.on('error', (error) => {
        exited = true;
        send(8, Buffer.from(JSON.stringify({ code: error.code, message: error.message })));
        socket.end();
      });
      child.stdin.on('error', () => {});
      child.stdin.on('drain', () => socket.resume());
      child.stdout.on('data', (chunk) => {
        if (!send(5, chunk)) child.stdout.pause();
      });
      child.stderr.on('data', (chunk) => send(6, chunk));
      socket.on('drain', () => child?.stdout.resume());
      child.on('close', (code, signal) => {
        if (exited) return;
        exited = true;
        send(7, Buffer.from(JSON.stringify({ code, signal })));
        socket.end();
      });
    } else if (type === 2 && child) {
      if (!child.stdin.write(payload)) socket.pause();
    } else if (type === 3 && child) {
      child.stdin.end();
    } else if (type === 4 && child) {
      child.kill('SIGKILL');
    }
  };
  socket.on('data', (chunk) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    while (buffer.length >= 5) {
      const length = buffer.readUInt32BE(1);
      if (buffer.length < 5 + length) break;
      const type = buffer.readUInt8(0);
      const payload = buffer.subarray(5, 5 + length);
      buffer = buffer.subarray(5 + length);
      onFrame(type, payload);
    }
  });
  // The server went away (client disconnected, request aborted): stop git.
  socket.on('close', () => {
    if (child && !exited) child.kill('SIGKILL');
  });
  socket.on('error', () => {});
}

const server = net.createServer(serve);
server.listen(socketPath, () => process.send?.('ready'));
// The spawner lives exactly as long as the server: when the IPC channel closes, it exits.
process.on('disconnect', () => process.exit(0));
