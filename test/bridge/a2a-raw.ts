/**
 * A raw A2A v1.0 JSON-RPC `SendMessage` (no SDK client: what any HTTP client can send), for the
 * tests of what the bridge's A2A face refuses before the SDK sees a message.
 */

/** POSTs `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {message}}` to `url` with the A2A version header and `headers`. */
export function rawSendMessage(url: string, message: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message } }),
  });
}
