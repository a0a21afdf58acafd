/**
 * `jcp grant mint|delegate|revoke|show|checkpoint|amend|continue`: grants (§4), attenuation (§4.1),
 * revocation (§4.3) and steering (§4.7: checkpoint, amendment, continuation) from the command line.
 */
import { randomBytes } from 'node:crypto';
import {
  type Actor,
  amend,
  amendmentId,
  attenuate,
  type AttenuationParams,
  checkpointId,
  type Grant,
  grantId,
  grantToCbor,
  isJcpError,
  issueContinuation,
  makeCheckpoint,
  readGrant,
  type SignedAmendment,
  type SignedCheckpoint,
  type SignedGrant,
  signGrant,
  signRevocation,
  type SteeringRefusal,
  verifyAmendment,
} from '../core/index.ts';
import { readKeyFile } from '../node/index.ts';
import { JcpClient, WireErrorReply } from '../client/index.ts';
import { grantView, readChainFile, writeChainFile } from '../client/index.ts';
import { actionsArg, didArg, expiryArg, hostPortArg, resourceArg, ujArg } from './args.ts';
import { CliError, type Command, UsageError, connectionError, parse } from './command.ts';
import { commitmentArg, readAmendmentFile, readCheckpointFile, writeAmendmentFile, writeCheckpointFile } from './steerfile.ts';

const help = `Usage:
  jcp grant mint --key issuer.key --subject did|keyfile --resource name|cid --actions a,b
                 --budget uj [--expiry 0|unix|+secs] [--depth n] --out chain.json
  jcp grant delegate --chain parent.json --key holder.key --subject did|keyfile --budget uj
                 [--actions a,b] [--expiry ...] [--depth n] --out child.json
  jcp grant revoke --chain chain.json --key issuer.key --node host:port [--link i]
  jcp grant show --chain chain.json
  jcp grant checkpoint --chain run.json --key agent.key --state file|cid --out checkpoint.json
  jcp grant amend --chain run.json --checkpoint checkpoint.json --key issuer.key --budget uj
                 [--instructions file|cid] [--node host:port]... --out amendment.json
  jcp grant amend --chain run.json --send amendment.json --node host:port...
  jcp grant continue --chain run.json --amendment amendment.json --key issuer.key
                 [--checkpoint checkpoint.json] --out continuation.json

mint      signs a root grant (§4) as the issuer; the resource is a content id, or a name as the
          node config names it (its id is blake3 of {jcp_resource: name}).
delegate  attenuates the chain's leaf (§4.1, §4.4) as its holder; writes the longer chain.
revoke    signs a revocation (§4.3) of link i (default: the leaf) as that grant's issuer and sends
          it to a node over jcp/1. A node in a cluster (nats) publishes it on the revocation
          stream, so every node of the cluster enforces it.
show      prints the chain as JSON.
checkpoint  the agent (the leaf's subject) commits to its state (§4.7): a content id, or a file
          whose content id is taken; prints the checkpoint id.
amend     the leaf's issuer steers the run at that checkpoint (§4.7): a budget no larger than the
          leaf's, optionally a new instruction-set commitment; with --node (repeatable) the
          amendment is sent to each node, which from then on refuses the steered grant (revoked)
          and caps the continuation at min(budget, steered budget - steered spend there).
          --send sends an amendment file signed before (to more nodes), checked here first.
continue  the issuer re-issues the run as the continuation the amendment links (§4.7); writes
          the chain with the continuation as its leaf.
Refusals exit 1 with a stable code: not-agent, wrong-grant, self-steering, not-issuer, widening,
wrong-checkpoint; a node's refusal is amendment-refused naming the same codes.

Chain files are JSON ({"type": "jcp-chain", "chain": [{id, cbor, grant}]}, root first). cbor is
the signed grant; id and grant are for people and may be left out, but a grant view that
disagrees with its cbor (an edited budget or action) is refused [chain-file-mismatch] by every
command that reads chain files.`;

const nonce = () => new Uint8Array(randomBytes(16));
const nowS = () => Math.floor(Date.now() / 1000);

/** The `jcp grant` command. */
export const command: Command = {
  name: 'grant',
  summary: 'mint, delegate, revoke, show or steer (checkpoint, amend, continue) grant chains',
  help,
  async run(argv) {
    const [verb, ...rest] = argv;
    switch (verb) {
      case 'mint':
        return mint(rest);
      case 'delegate':
        return delegate(rest);
      case 'revoke':
        return revoke(rest);
      case 'checkpoint':
        return checkpoint(rest);
      case 'amend':
        return amendRun(rest);
      case 'continue':
        return continueRun(rest);
      case 'show': {
        const { values } = parse(rest, { chain: { type: 'string' } }, false);
        const chain = readChainFile(need(values.chain, '--chain'));
        process.stdout.write(
          `${JSON.stringify(
            chain.map((sg) => ({ id: grantId(sg.grant), grant: grantView(sg.grant) })),
            null,
            2,
          )}\n`,
        );
        return 0;
      }
      default:
        throw new UsageError(
          verb === undefined
            ? 'expected a verb: mint | delegate | revoke | show | checkpoint | amend | continue'
            : `unknown verb '${verb}'`,
        );
    }
  },
};

function need(v: string | undefined, flag: string): string {
  if (v === undefined) throw new UsageError(`${flag} is required`);
  return v;
}

function depthArg(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--depth: expected a non-negative integer, got ${v}`);
  return Number(v);
}

/**
 * Refuses (usage error) a grant that the schema reader would refuse when the chain file is loaded
 * again (§4 field limits, e.g. an action longer than 256), so nothing unreadable is ever written.
 */
function loadable(g: Grant): void {
  try {
    readGrant(grantToCbor(g));
  } catch (e) {
    if (isJcpError(e)) throw new UsageError(`the grant would not load back: ${e.message}`);
    throw e;
  }
}

/** What a root grant says (§4): its subject, resource, actions, budget (µJ), expiry and depth. */
export interface RootGrantParams {
  readonly subject: Grant['subject'];
  readonly resource: Grant['capability']['resource'];
  readonly actions: readonly string[];
  readonly budgetUj: bigint;
  /** Unix seconds; 0 = never. */
  readonly expiryS: number;
  /** Further hops permitted (§4.4); absent = unlimited. */
  readonly delegateDepth?: number;
}

/**
 * Signs a root grant (§4) as `issuer`, with a fresh random 16-byte nonce: what `jcp grant mint`
 * and `jcp init` write as a one-link chain.
 * @throws UsageError when the grant would not load back (§4 field limits, e.g. more than 256 actions).
 */
export function mintRoot(issuer: Actor, p: RootGrantParams): SignedGrant {
  const g: Grant = {
    issuer: issuer.did,
    subject: p.subject,
    capability: { resource: p.resource, actions: [...p.actions] },
    budget_uj: p.budgetUj,
    expiry: p.expiryS,
    ...(p.delegateDepth !== undefined ? { delegate_depth: p.delegateDepth } : {}),
    nonce: nonce(),
  };
  loadable(g);
  return signGrant(g, issuer);
}

function mint(argv: string[]): number {
  const { values } = parse(
    argv,
    {
      key: { type: 'string' },
      subject: { type: 'string' },
      resource: { type: 'string' },
      actions: { type: 'string' },
      budget: { type: 'string' },
      expiry: { type: 'string' },
      depth: { type: 'string' },
      out: { type: 'string' },
    },
    false,
  );
  const issuer = readKeyFile(need(values.key, '--key'));
  const depth = depthArg(values.depth);
  const sg = mintRoot(issuer, {
    subject: didArg(need(values.subject, '--subject')),
    resource: resourceArg(need(values.resource, '--resource')),
    actions: actionsArg(need(values.actions, '--actions')),
    budgetUj: ujArg(need(values.budget, '--budget'), '--budget'),
    expiryS: expiryArg(values.expiry ?? '0', nowS()),
    ...(depth !== undefined ? { delegateDepth: depth } : {}),
  });
  writeChainFile(need(values.out, '--out'), [sg]);
  process.stdout.write(`${grantId(sg.grant)}\n`);
  return 0;
}

function delegate(argv: string[]): number {
  const { values } = parse(
    argv,
    {
      chain: { type: 'string' },
      key: { type: 'string' },
      subject: { type: 'string' },
      actions: { type: 'string' },
      budget: { type: 'string' },
      expiry: { type: 'string' },
      depth: { type: 'string' },
      out: { type: 'string' },
    },
    false,
  );
  const chain = readChainFile(need(values.chain, '--chain'));
  const holder = readKeyFile(need(values.key, '--key'));
  const depth = depthArg(values.depth);
  const params: AttenuationParams = {
    subject: didArg(need(values.subject, '--subject')),
    ...(values.actions !== undefined ? { actions: actionsArg(values.actions) } : {}),
    budget_uj: ujArg(need(values.budget, '--budget'), '--budget'),
    ...(values.expiry !== undefined ? { expiry: expiryArg(values.expiry, nowS()) } : {}),
    ...(depth !== undefined ? { delegate_depth: depth } : {}),
    nonce: nonce(),
  };
  const r = attenuate(chain[chain.length - 1]!, params, holder);
  if (!r.ok) {
    process.stderr.write(`jcp grant: error [${r.error.reason}]: delegate refused: ${r.error.why}\n`);
    return 1;
  }
  loadable(r.value.grant);
  writeChainFile(need(values.out, '--out'), [...chain, r.value]);
  process.stdout.write(`${grantId(r.value.grant)}\n`);
  return 0;
}

async function revoke(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    { chain: { type: 'string' }, key: { type: 'string' }, node: { type: 'string' }, link: { type: 'string' } },
    false,
  );
  const { host, port } = hostPortArg(need(values.node, '--node'), '--node');
  const chain = readChainFile(need(values.chain, '--chain'));
  const i = values.link === undefined ? chain.length - 1 : Number(values.link);
  const link = chain[i];
  if (!Number.isInteger(i) || link === undefined) throw new UsageError(`--link: no link ${values.link} in a chain of ${chain.length}`);
  const revoker = readKeyFile(need(values.key, '--key'));
  if (revoker.did !== link.grant.issuer) {
    // §4.3: only the grant's issuer may revoke it; a node would refuse this revocation as soon
    // as it knows the grant, so refuse it here rather than send something that cannot work.
    process.stderr.write(
      `jcp grant: error [not-issuer]: revoke refused: ${revoker.did} is not the issuer of link ${i} (${link.grant.issuer})\n`,
    );
    return 1;
  }
  const sr = signRevocation(grantId(link.grant), revoker, nonce());
  let client: JcpClient;
  try {
    client = await JcpClient.connect({ host, port, reconnectAttempts: 0 });
  } catch (e) {
    throw connectionError(e, `node ${values.node}`);
  }
  try {
    const id = await client.revoke(sr, link.grant);
    process.stdout.write(`${JSON.stringify({ revoked: id })}\n`);
    return 0;
  } catch (e) {
    if (e instanceof WireErrorReply) {
      process.stderr.write(`jcp grant: error [${e.code}]: revoke refused: ${e.message}\n`);
      return 1;
    }
    throw connectionError(e, `node ${values.node}`);
  } finally {
    await client.close();
  }
}

function steeringRefused(what: string, r: SteeringRefusal): CliError {
  return new CliError(r.code, `${what} refused: ${r.why}`);
}

function checkpoint(argv: string[]): number {
  const { values } = parse(
    argv,
    { chain: { type: 'string' }, key: { type: 'string' }, state: { type: 'string' }, out: { type: 'string' } },
    false,
  );
  const chain = readChainFile(need(values.chain, '--chain'));
  const agent = readKeyFile(need(values.key, '--key'));
  const state = commitmentArg(need(values.state, '--state'), 'state file');
  const out = need(values.out, '--out');
  const r = makeCheckpoint(chain[chain.length - 1]!, state, agent, nonce());
  if (!r.ok) throw steeringRefused('checkpoint', r.error);
  writeCheckpointFile(out, r.value);
  process.stdout.write(`${checkpointId(r.value)}\n`);
  return 0;
}

async function amendRun(argv: string[]): Promise<number> {
  const { values } = parse(
    argv,
    {
      chain: { type: 'string' },
      checkpoint: { type: 'string' },
      key: { type: 'string' },
      budget: { type: 'string' },
      instructions: { type: 'string' },
      node: { type: 'string', multiple: true },
      out: { type: 'string' },
      send: { type: 'string' },
    },
    false,
  );
  const chain = readChainFile(need(values.chain, '--chain'));
  const steered = chain[chain.length - 1]!;
  const nodes = (values.node ?? []).map((n) => ({ name: n, ...hostPortArg(n, '--node') }));
  let cp: SignedCheckpoint;
  let sa: SignedAmendment;
  if (values.send !== undefined) {
    // Send an amendment signed before (to more nodes, or again): checked here first, as the node will.
    for (const flag of ['checkpoint', 'key', 'budget', 'instructions', 'out'] as const) {
      if (values[flag] !== undefined) throw new UsageError(`--send takes an amendment file as it is; --${flag} does not go with it`);
    }
    if (nodes.length === 0) throw new UsageError('--send needs at least one --node');
    ({ amendment: sa, checkpoint: cp } = readAmendmentFile(values.send));
    const pair = verifyAmendment(sa, cp, steered);
    if (!pair.ok) throw steeringRefused('amend', pair.error);
  } else {
    cp = readCheckpointFile(need(values.checkpoint, '--checkpoint'));
    const issuer = readKeyFile(need(values.key, '--key'));
    const budget = ujArg(need(values.budget, '--budget'), '--budget');
    const instructions = values.instructions === undefined ? undefined : commitmentArg(values.instructions, 'instructions file');
    const out = need(values.out, '--out');
    const r = amend(cp, steered, { budget_uj: budget, nonce: nonce(), ...(instructions !== undefined ? { instructions } : {}) }, issuer);
    if (!r.ok) throw steeringRefused('amend', r.error);
    sa = r.value;
    writeAmendmentFile(out, { amendment: sa, checkpoint: cp });
  }
  const sent: Array<Record<string, unknown>> = [];
  let refused: CliError | undefined;
  for (const n of nodes) {
    let client: JcpClient;
    try {
      client = await JcpClient.connect({ host: n.host, port: n.port, reconnectAttempts: 0 });
    } catch (e) {
      throw connectionError(e, `node ${n.name}`);
    }
    try {
      const a = await client.amend(steered, cp, sa);
      sent.push({
        node: n.name,
        continuation_id: a.continuation_id,
        budget_uj: a.budget_uj.toString(),
        steered_spent_uj: a.steered_spent_uj.toString(),
      });
    } catch (e) {
      if (!(e instanceof WireErrorReply)) throw connectionError(e, `node ${n.name}`);
      sent.push({ node: n.name, error: { code: e.code, message: e.message } });
      refused ??= new CliError(e.code, `amend refused by node ${n.name}: ${e.message}`);
    } finally {
      await client.close();
    }
  }
  process.stdout.write(`${JSON.stringify({ amendment: amendmentId(sa), steered: grantId(steered.grant), nodes: sent })}\n`);
  if (refused) throw refused;
  return 0;
}

function continueRun(argv: string[]): number {
  const { values } = parse(
    argv,
    {
      chain: { type: 'string' },
      amendment: { type: 'string' },
      checkpoint: { type: 'string' },
      key: { type: 'string' },
      out: { type: 'string' },
    },
    false,
  );
  const chain = readChainFile(need(values.chain, '--chain'));
  const steered = chain[chain.length - 1]!;
  const file = readAmendmentFile(need(values.amendment, '--amendment'));
  const cp = values.checkpoint === undefined ? file.checkpoint : readCheckpointFile(values.checkpoint);
  const issuer = readKeyFile(need(values.key, '--key'));
  const out = need(values.out, '--out');
  const r = issueContinuation(steered, cp, file.amendment, issuer);
  if (!r.ok) throw steeringRefused('continue', r.error);
  writeChainFile(out, [...chain.slice(0, -1), r.value]);
  process.stdout.write(`${grantId(r.value.grant)}\n`);
  return 0;
}
