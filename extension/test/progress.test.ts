import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { endKind, formatProgressMessage, ProgressTracker } from '../src/progress';

test('formatProgressMessage puts the percentage before the phase path', () => {
  assert.equal(formatProgressMessage('Building engine › Timing tactics 2/3 · 4.1 s', 42.4), '42% · Building engine › Timing tactics 2/3 · 4.1 s');
  assert.equal(formatProgressMessage(undefined, 7), '7%');
  assert.equal(formatProgressMessage('x', undefined), 'x');
  assert.equal(formatProgressMessage('x', 250), '100% · x');
  assert.equal(formatProgressMessage('  ', undefined), '');
});

test('tracker keeps the last message and reports monotonic increments', () => {
  const t = new ProgressTracker();
  assert.deepEqual(t.apply({ kind: 'begin', title: 'Building large', cancellable: true, percentage: 0 }), { message: '0%', increment: undefined });
  assert.equal(t.title, 'Building large');
  assert.equal(t.cancellable, true);
  assert.deepEqual(t.apply({ kind: 'report', message: 'Building engine › Parsing 1/1', percentage: 10 }), { message: '10% · Building engine › Parsing 1/1', increment: 10 });
  assert.deepEqual(t.apply({ kind: 'report', percentage: 25 }), { message: '25% · Building engine › Parsing 1/1', increment: 15 });
  // a falling percentage does not move the bar back
  assert.deepEqual(t.apply({ kind: 'report', message: 'm', percentage: 20 }), { message: '20% · m', increment: undefined });
  assert.deepEqual(t.apply({ kind: 'report', percentage: 30 }), { message: '30% · m', increment: 5 });
  assert.equal(t.apply({ kind: 'end', message: 'cancelled by ide_stop', outcome: 'cancelled', outcomeKind: 'cancelled' }), undefined);
  assert.equal(t.ended, true);
  assert.equal(t.endMessage, 'cancelled by ide_stop');
  assert.equal(t.endKind, 'cancelled');
  assert.equal(t.apply({ kind: 'report', percentage: 90 }), undefined);
});

test('endKind is the server\'s outcomeKind, never read from the message', () => {
  assert.equal(endKind({ kind: 'end', message: 'built in 3.2 s', outcome: 'built', outcomeKind: 'ok' }), 'ok');
  assert.equal(endKind({ kind: 'end', message: 'forced: …', outcome: 'forced', outcomeKind: 'failed' }), 'failed');
  assert.equal(endKind({ kind: 'end', message: 'license: reject', outcome: 'reject', outcomeKind: 'refused' }), 'refused');
  assert.equal(endKind({ kind: 'end', message: 'slow: no decision (cancelled)', outcome: 'cancelled', outcomeKind: 'cancelled' }), 'cancelled');
  // prose alone says nothing: another server's progress, or a kind this client does not know
  assert.equal(endKind({ kind: 'end', message: 'built in 3.2 s' }), 'other');
  assert.equal(endKind({ kind: 'end', message: 'failed: out of memory' }), 'other');
  assert.equal(endKind({ kind: 'end', outcomeKind: 'splendid' }), 'other');
});
