import { checkJson, type Bus } from '../bus/bus.js';
import { itemEnvelope, MAX_SENT_APART, type BatchItem, type BatchMode } from './batch.js';
import type { Envelope, EnvelopeSigner, SealOptions } from './envelope.js';

/**
 * Most messages in one batch envelope: a few hundred job events or domain
 * events stay far below the broker's message size, and a redelivered batch
 * stays small.
 */
const MAX_TOGETHER = 256;
/**
 * How long a batch envelope waits for company: the events a burst of job.run
 * deliveries causes arrive over a few milliseconds, not in one turn, and
 * each broker message saved is a system call on both sides. Far below
 * anything a job's timing notices.
 */
const TOGETHER_LINGER_MS = 5;

interface Waiting {
  readonly item: BatchItem;
  resolve(envelope: Envelope): void;
  reject(err: unknown): void;
}

interface OpenBatch {
  readonly queue: string;
  readonly mode: BatchMode;
  readonly ttlMs: number;
  readonly waiting: Waiting[];
}

/**
 * Publishes to the queues of a BatchMode (docs/adr/0024-batch-envelopes.md):
 * the messages published to one queue with one lifetime at nearly the same
 * time are signed once — in one batch envelope, one broker message
 * and one publisher confirm (`together`), or each in a broker message of its
 * own under a signature over all their digests (`apart`). Each publish
 * resolves once the broker confirmed its message. A message published alone
 * in its turn leaves as an envelope of its own, as before batches. A batch
 * sent apart leaves at the end of the turn (a hand-out pass publishes its
 * jobs in one); one sent together TOGETHER_LINGER_MS after its first message.
 */
export class PublishBatches {
  private readonly open = new Map<string, OpenBatch>();

  constructor(
    private readonly bus: Bus,
    private readonly signer: EnvelopeSigner,
  ) {}

  publish(queue: string, mode: BatchMode, type: string, body: unknown, options: SealOptions): Promise<Envelope> {
    // A misuse fails its own publish here, never the batch it would have joined.
    const ttlMs = this.signer.checkTtl(options.ttlMs);
    const item = this.signer.item(type, body, options);
    checkJson(body);
    const key = `${ttlMs}\u0000${queue}`;
    let batch = this.open.get(key);
    if (!batch) {
      const opened: OpenBatch = { queue, mode, ttlMs, waiting: [] };
      this.open.set(key, opened);
      if (mode === 'together') setTimeout(() => this.close(key, opened), TOGETHER_LINGER_MS);
      else setImmediate(() => this.close(key, opened));
      batch = opened;
    }
    const { waiting } = batch;
    const sent = new Promise<Envelope>((resolve, reject) => waiting.push({ item, resolve, reject }));
    if (waiting.length >= (mode === 'together' ? MAX_TOGETHER : MAX_SENT_APART)) this.close(key, batch);
    return sent;
  }

  private close(key: string, batch: OpenBatch): void {
    if (this.open.get(key) !== batch) return; // full: it left already
    this.open.delete(key);
    if (batch.waiting.length === 1) void this.sendAlone(batch);
    else if (batch.mode === 'together') void this.sendTogether(batch);
    else this.sendApart(batch);
  }

  private async sendAlone({ queue, ttlMs, waiting }: OpenBatch): Promise<void> {
    const [w] = waiting as [Waiting];
    const { item } = w;
    try {
      const envelope = this.signer.seal(item.type, item.body, { ttlMs, subject: item.subject, reqId: item.req_id });
      await this.bus.publish(queue, envelope, { messageId: envelope.id, type: envelope.type });
      w.resolve(envelope);
    } catch (err) {
      w.reject(err);
    }
  }

  private async sendTogether({ queue, ttlMs, waiting }: OpenBatch): Promise<void> {
    try {
      const envelope = this.signer.sealBatch(waiting.map((w) => w.item), ttlMs);
      await this.bus.publish(queue, envelope, { messageId: envelope.id, type: envelope.type });
      for (const w of waiting) w.resolve(itemEnvelope(w.item, envelope));
    } catch (err) {
      for (const w of waiting) w.reject(err);
    }
  }

  /** Each message confirmed, or refused, on its own: one failing does not fail the others. */
  private sendApart({ queue, ttlMs, waiting }: OpenBatch): void {
    let envelopes: Envelope[];
    try {
      envelopes = this.signer.sealApart(waiting.map((w) => w.item), ttlMs);
    } catch (err) {
      for (const w of waiting) w.reject(err);
      return;
    }
    waiting.forEach((w, i) => {
      const envelope = envelopes[i]!;
      this.bus.publish(queue, envelope, { messageId: envelope.id, type: envelope.type }).then(() => w.resolve(envelope), w.reject);
    });
  }
}
