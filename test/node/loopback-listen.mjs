// Preloaded (node --import) into a third-party MCP server under test: a listen(port) without a
// host is bound to 127.0.0.1 instead of every interface, and the bound port is printed on stderr
// as `JCP-LISTENING <port>` (the server itself may print the port it was asked for, such as 0).
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const portOnly = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first));
  if (portOnly && (args.length === 1 || typeof args[1] === 'function')) {
    const cb = typeof args[1] === 'function' ? args[1] : undefined;
    args = [{ port: Number(first), host: '127.0.0.1' }, ...(cb ? [cb] : [])];
  }
  this.once('listening', () => {
    const a = this.address();
    if (a && typeof a === 'object') process.stderr.write(`JCP-LISTENING ${a.port}\n`);
  });
  return listen.apply(this, args);
};
