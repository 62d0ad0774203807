// A root hook for mocha (.mocharc.cjs `require`). mocha runs without `exit: true`,
// so a socket, server, timer or child process a suite leaves behind keeps the run
// from ending. Rather than hang, the run ends ORLOJ_LEAK_GRACE_MS (default 15 s)
// after the last test with exit code 1 and the list of what still holds it open.
// The timer is unref'd: a run that ends on its own never sees it.
const grace = Number(process.env.ORLOJ_LEAK_GRACE_MS || 15_000);

exports.mochaHooks = {
  afterAll() {
    setTimeout(() => {
      const lines = process._getActiveHandles().map((h) => {
        let what = h.constructor ? h.constructor.name : typeof h;
        try {
          if (h.spawnargs) what += ` (child process: ${h.spawnargs.join(' ')})`;
          else if (typeof h.address === 'function' && h.listening) what += ` (listening on ${JSON.stringify(h.address())})`;
          else if (h.remoteAddress) what += ` (${h.localAddress}:${h.localPort} -> ${h.remoteAddress}:${h.remotePort})`;
        } catch {
          // a handle that cannot describe itself is still listed by its class
        }
        return `  ${what}`;
      });
      process.stderr.write(
        `\nThe test run did not end ${grace} ms after its last test: something a suite started is still open.\n` +
          `Active resources: ${process.getActiveResourcesInfo().join(', ')}\n${lines.join('\n')}\n`,
      );
      // mocha (without `exit`) sets the exit code to its failure count in an 'exit'
      // listener; this one, added later, runs after it.
      process.on('exit', () => {
        process.exitCode = 1;
      });
      process.exit(1);
    }, grace).unref();
  },
};
