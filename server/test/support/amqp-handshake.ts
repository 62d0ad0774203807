/**
 * Reads what an AMQP 0-9-1 client announced in its handshake, from the bytes
 * it sent (TcpProxy's `recordBytes`): the client properties of its
 * Connection.Start-Ok, which RabbitMQ keeps for the connection
 * (`connection_name` is the name the management UI and `rabbitmqctl
 * list_connections` show). Written from the protocol specification, not
 * with the client library's codec, so it checks what went on the wire.
 */

const PROTOCOL_HEADER = Buffer.from('AMQP\x00\x00\x09\x01', 'latin1');
const FRAME_METHOD = 1;
const FRAME_END = 0xce;
const CONNECTION_CLASS = 10;
const START_OK = 11;

/** The client properties of the Connection.Start-Ok in `sent`, or undefined when the bytes hold none (yet). */
export function amqpClientProperties(sent: Buffer): Record<string, unknown> | undefined {
  if (sent.length < PROTOCOL_HEADER.length || !sent.subarray(0, PROTOCOL_HEADER.length).equals(PROTOCOL_HEADER)) return undefined;
  let at = PROTOCOL_HEADER.length;
  while (at + 7 <= sent.length) {
    const type = sent.readUInt8(at);
    const size = sent.readUInt32BE(at + 3);
    const payload = at + 7;
    if (payload + size + 1 > sent.length) return undefined;
    if (sent.readUInt8(payload + size) !== FRAME_END) throw new Error(`not an AMQP frame at byte ${at}`);
    if (type === FRAME_METHOD && sent.readUInt16BE(payload) === CONNECTION_CLASS && sent.readUInt16BE(payload + 2) === START_OK) {
      const length = sent.readUInt32BE(payload + 4);
      return readTable(sent.subarray(payload + 8, payload + 8 + length));
    }
    at = payload + size + 1;
  }
  return undefined;
}

/** A field table (AMQP 0-9-1 §4.2.5.5, with RabbitMQ's field types). */
function readTable(b: Buffer): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let at = 0;
  while (at < b.length) {
    const nameLength = b.readUInt8(at);
    const name = b.toString('utf8', at + 1, at + 1 + nameLength);
    const [value, next] = readValue(b, at + 1 + nameLength);
    out[name] = value;
    at = next;
  }
  return out;
}

/** Field types of a fixed size: their width in bytes and their reader. */
const FIXED: Record<string, [number, (b: Buffer, at: number) => unknown]> = {
  t: [1, (b, at) => b.readUInt8(at) !== 0],
  b: [1, (b, at) => b.readInt8(at)],
  B: [1, (b, at) => b.readUInt8(at)],
  s: [2, (b, at) => b.readInt16BE(at)],
  u: [2, (b, at) => b.readUInt16BE(at)],
  I: [4, (b, at) => b.readInt32BE(at)],
  i: [4, (b, at) => b.readUInt32BE(at)],
  f: [4, (b, at) => b.readFloatBE(at)],
  l: [8, (b, at) => b.readBigInt64BE(at)],
  T: [8, (b, at) => b.readBigUInt64BE(at)],
  d: [8, (b, at) => b.readDoubleBE(at)],
  D: [5, (b, at) => ({ places: b.readUInt8(at), digits: b.readUInt32BE(at + 1) })],
  V: [0, () => null],
};

function readValue(b: Buffer, at: number): [unknown, number] {
  const tag = String.fromCharCode(b.readUInt8(at));
  const v = at + 1;
  const fixed = FIXED[tag];
  if (fixed) return [fixed[1](b, v), v + fixed[0]];
  if (!'SxFA'.includes(tag)) throw new Error(`unknown AMQP field type ${JSON.stringify(tag)} at byte ${at}`);
  // The others are sized: a 32-bit length, then that many bytes.
  const end = v + 4 + b.readUInt32BE(v);
  const bytes = b.subarray(v + 4, end);
  if (tag === 'S') return [bytes.toString('utf8'), end];
  if (tag === 'x') return [bytes, end];
  if (tag === 'F') return [readTable(bytes), end];
  const items: unknown[] = [];
  for (let i = 0; i < bytes.length; ) {
    const [item, next] = readValue(bytes, i);
    items.push(item);
    i = next;
  }
  return [items, end];
}
