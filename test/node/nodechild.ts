/**
 * A node process for the kill -9 test: it loads the node's code first, says `ready` on stderr,
 * then runs `jcp node start --config <file>` when the file name arrives on stdin. The test starts
 * the next process while the current one is under load, so the restarts measure recovery, not
 * module loading.
 */
import { main, nodeCommand } from '../../cli/internal.ts';

void nodeCommand; // loaded before `ready`: the restarts measure recovery, not module loading
process.stderr.write('ready\n');
process.stdin.once('data', (d: Buffer) => {
  process.stdin.pause();
  main(['node', 'start', '--config', d.toString('utf8').trim()]).then((code) => {
    process.exitCode = code;
  });
});
