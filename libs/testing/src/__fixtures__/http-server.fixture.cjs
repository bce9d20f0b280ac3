// A tiny HTTP server for the process harness tests. It starts a grandchild in its own process
// group, prints "child <pid>" and "listening on <port>", and exits 0 on SIGTERM unless started
// with --ignore-sigterm. With --exit-early it fails before listening.
'use strict';
const http = require('node:http');
const { spawn } = require('node:child_process');

if (process.argv.includes('--exit-early')) {
  process.stderr.write('fixture: refusing to start\n');
  process.exit(3);
}
const grandchild = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], {
  stdio: 'ignore',
});
process.stdout.write(`child ${grandchild.pid}\n`);
if (process.argv.includes('--ignore-sigterm')) {
  process.on('SIGTERM', () => process.stdout.write('ignoring SIGTERM\n'));
} else {
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
const server = http.createServer((req, res) => {
  res.statusCode = req.url === '/ok' ? 200 : 404;
  res.end(req.url);
});
if (!process.argv.includes('--never-listen')) {
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening on ${server.address().port}\n`));
} else {
  setInterval(() => {}, 1000);
}
