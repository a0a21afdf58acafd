/**
 * The test agent of testkit/a2a-agent.ts as a process of its own (for tests whose agent must be
 * killable, e.g. a runaway stream): prints `{"url": …}` on one line when it listens; stops on
 * SIGTERM or when its stdin closes.
 */
import { startA2aAgent } from './a2a-agent.ts';

const agent = await startA2aAgent({ name: process.argv[2] ?? 'agent' });
process.stdout.write(`${JSON.stringify({ url: agent.url })}\n`);
const stop = () => void agent.stop().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
