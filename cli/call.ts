/** `jcp call`: one signed jcp/1 call to a node (§11), printing the decision and the receipt as JSON. */
import { toHex } from '../core/bytes.ts';
import { PROVENANCES, type Provenance } from '../core/energy.ts';
import { FRAME_KINDS, type FrameKind, TRUST_TAGS, type Trust } from '../core/frame.ts';
import { openReceipt, receiptId } from '../core/receipt.ts';
import { JcpClient, WireErrorReply, parseHostPort, readKeyFile, resultJson } from '../node/index.ts';
import { readChainFile, ujArg } from './chainfile.ts';
import { type Command, UsageError, parse } from './command.ts';

const help = `Usage: jcp call --node host:port --chain file --key file --action name [--payload json]
                [--cost uj] [--provenance Estimator|ModelBased] [--kind tool-call] [--trust control]

Signs a WireRequest as the key's actor (the caller, §11) with the chain's leaf as the grant and
sends it to the node. Prints {"decision", "receipt": {"id", "core", "cbor"}, "result"} as JSON;
the result (the endpoint's output, data only, §6) is shown parsed when it is JSON.

Exit status: 0 allow, 3 deny, 1 an error reply (no decision, no receipt) or a failure.`;

/** The `jcp call` command. */
export const command: Command = {
  name: 'call',
  summary: 'send one signed call to a node and print decision + receipt',
  help,
  async run(argv) {
    const { values } = parse(
      argv,
      {
        node: { type: 'string' },
        chain: { type: 'string' },
        key: { type: 'string' },
        action: { type: 'string' },
        payload: { type: 'string' },
        cost: { type: 'string' },
        provenance: { type: 'string' },
        kind: { type: 'string' },
        trust: { type: 'string' },
      },
      false,
    );
    for (const f of ['node', 'chain', 'key', 'action'] as const) if (values[f] === undefined) throw new UsageError(`--${f} is required`);
    const provenance = (values.provenance ?? 'Estimator') as Provenance;
    if (!PROVENANCES.includes(provenance) || provenance === 'HwShunt') throw new UsageError('--provenance: Estimator or ModelBased');
    const kind = (values.kind ?? 'tool-call') as FrameKind;
    if (!FRAME_KINDS.includes(kind)) throw new UsageError(`--kind: one of ${FRAME_KINDS.join('|')}`);
    const trust = (values.trust ?? 'control') as Trust;
    if (!TRUST_TAGS.includes(trust)) throw new UsageError(`--trust: one of ${TRUST_TAGS.join('|')}`);
    let payload: Record<string, unknown> | undefined;
    if (values.payload !== undefined) {
      try {
        payload = JSON.parse(values.payload) as Record<string, unknown>;
      } catch (e) {
        throw new UsageError(`--payload: not JSON: ${(e as Error).message}`);
      }
    }
    const chain = readChainFile(values.chain!);
    const actor = readKeyFile(values.key!);
    const { host, port } = parseHostPort(values.node!, '--node');
    const cost = { uj: ujArg(values.cost ?? '0', '--cost'), provenance };
    const client = await JcpClient.connect({ host, port, signer: actor, reconnectAttempts: 2 });
    try {
      const r = await client.call({
        chain,
        action: values.action!,
        ...(payload !== undefined ? { payload } : {}),
        cost,
        kind,
        trust,
      });
      const opened = openReceipt(r.receipt);
      const core = opened.ok ? opened.value : { unverifiable: opened.error };
      const out = {
        decision: r.decision,
        request_id: r.requestId,
        receipt: { id: receiptId(r.receipt), core, cbor: toHex(r.receipt) },
        ...(r.result !== undefined ? { result: resultJson(r.result) } : {}),
      };
      process.stdout.write(`${JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2)}\n`);
      return r.decision.verdict === 'allow' ? 0 : 3;
    } catch (e) {
      if (e instanceof WireErrorReply) {
        process.stdout.write(`${JSON.stringify({ error: { code: e.code, message: e.message } }, null, 2)}\n`);
        return 1;
      }
      throw e;
    } finally {
      await client.close();
    }
  },
};
