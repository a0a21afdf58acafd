/** `jcp key new|show`: Ed25519 actor key files (§2), mode 0600. */
import { randomBytes } from 'node:crypto';
import { actorFromSeed } from '../core/index.ts';
import { readKeyFile, writeKeyFile } from '../node/index.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage: jcp key new --out file
       jcp key show file

new   creates a fresh Ed25519 actor key (§2) in a new file with mode 0600 (never overwrites)
      and prints its did:key.
show  prints the did:key of a key file (refused when others can read the file).`;

/** The `jcp key` command. */
export const command: Command = {
  name: 'key',
  summary: 'create or show an actor key file (jcp key new --out file)',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    if (verb === 'new') {
      const { values } = parse(rest, { out: { type: 'string' } }, false);
      if (values.out === undefined) throw new UsageError('--out file is required');
      const actor = actorFromSeed(new Uint8Array(randomBytes(32)));
      writeKeyFile(values.out, actor);
      process.stdout.write(`${actor.did}\n`);
      return 0;
    }
    if (verb === 'show') {
      const { positionals } = parse(rest, {});
      if (positionals.length !== 1) throw new UsageError('expected one key file');
      process.stdout.write(`${readKeyFile(positionals[0]!).did}\n`);
      return 0;
    }
    throw new UsageError(verb === undefined ? 'expected a verb: new | show' : `unknown verb '${verb}'`);
  },
};
