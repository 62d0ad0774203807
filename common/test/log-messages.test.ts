import assert from 'node:assert/strict';
import { decodeLiveLogs, packLines, type LogLineMessage } from '../src/messages/index.js';

const line = (sequence_num: number, stream: 'stdout' | 'stderr' = 'stdout'): LogLineMessage => ({ sequence_num, stream, message: `line ${sequence_num}`, timestamp: 1_700_000_000_000 + sequence_num });
const head = { job_id: '0b9c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3', workflow_id: '1b9c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3', attempt: 2 };

describe('log.live bodies', () => {
  it('travel packed by column and decode to the same lines', () => {
    const lines = [line(7), line(8, 'stderr'), line(9)];
    const columns = packLines(lines);
    assert.deepEqual(columns, { first: 7, streams: 'oeo', messages: ['line 7', 'line 8', 'line 9'], timestamps: lines.map((l) => l.timestamp) });
    const wire = JSON.parse(JSON.stringify({ ...head, lines: [], columns })) as unknown;
    assert.deepEqual(decodeLiveLogs(wire), { ok: true, value: { ...head, lines } });
  });

  it('keep lines that are not consecutive one by one, and still read the unpacked form', () => {
    const lines = [line(1), line(3)];
    assert.equal(packLines(lines), undefined);
    assert.deepEqual(decodeLiveLogs({ ...head, lines }), { ok: true, value: { ...head, lines } });
  });

  it('refuses columns that do not line up', () => {
    const columns = { ...packLines([line(1), line(2)])!, timestamps: [1] };
    assert.equal(decodeLiveLogs({ ...head, lines: [], columns }).ok, false);
  });
});
