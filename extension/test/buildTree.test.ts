import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { BuildTreeModel, comparePhaseIds, describeBuild, describePhase, parseBuildTree, PhasePayload, statusBarText } from '../src/buildTree';
import { formatSeconds } from '../src/format';

function phase(over: Partial<PhasePayload> & { id: string }): PhasePayload {
  return {
    parentId: null, name: `phase ${over.id}`, numSteps: 0, step: null, status: 'running', elapsedS: 1, baselineS: null,
    quietForS: null, quietS: null, stalled: false, foldedInto: null, ...over,
  };
}

function payload(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    buildId: 'b1', engine: 'large', uri: 'file:///w/trtls.toml', status: 'running', cancelSource: null, outcomeMessage: null,
    elapsedS: 4.12, evidencePath: null,
    phases: [
      phase({ id: '0', name: 'Building engine', numSteps: 3, step: 0 }),
      phase({ id: '0.1', parentId: '0', name: 'Timing tactics', numSteps: 3, step: 2, elapsedS: 4.1, baselineS: 30 }),
      phase({ id: '0.0', parentId: '0', name: 'Parsing', numSteps: 1, step: 1, status: 'done', elapsedS: 0.2 }),
      phase({ id: '0.10', parentId: '0', name: 'Later', numSteps: 0 }),
      phase({ id: '0.2', parentId: '0', name: 'Quiet one', quietForS: 45, quietS: 45, stalled: true, baselineS: 30, elapsedS: 75 }),
    ],
    ...over,
  };
}

test('formatSeconds', () => {
  assert.equal(formatSeconds(0.04), '0.0 s');
  assert.equal(formatSeconds(4.12), '4.1 s');
  assert.equal(formatSeconds(30), '30 s');
  assert.equal(formatSeconds(65), '1 min 05 s');
  assert.equal(formatSeconds(7380), '2 h 03 min');
  assert.equal(formatSeconds(null), '–');
  assert.equal(formatSeconds(-1), '–');
});

test('comparePhaseIds orders dotted paths numerically', () => {
  const ids = ['0.10', '1', '0.2', '0', '0.1.3', '0.1'];
  assert.deepEqual([...ids].sort(comparePhaseIds), ['0', '0.1', '0.1.3', '0.2', '0.10', '1']);
});

test('parseBuildTree rejects garbage and normalises fields', () => {
  assert.equal(parseBuildTree(null), undefined);
  assert.equal(parseBuildTree({ engine: 'x' }), undefined);
  const p = parseBuildTree({ buildId: 'x', status: 'weird', phases: [{ id: '0', numSteps: 'no' }, 5] })!;
  assert.equal(p.status, 'running');
  assert.equal(p.phases.length, 1);
  assert.equal(p.phases[0]!.numSteps, 0);
  assert.equal(p.phases[0]!.name, '0');
  assert.equal(p.phases[0]!.stalled, false);
  assert.equal(p.phases[0]!.foldedInto, null);
  assert.equal(p.outcomeKind, null);
  assert.equal(parseBuildTree({ buildId: 'x', outcomeKind: 'great' })!.outcomeKind, null, 'an unknown kind is not trusted');
  const sent = parseBuildTree({ buildId: 'x', status: 'built', outcome: 'built', outcomeKind: 'ok',
    phases: [{ id: '0', quietForS: 3, quietS: 3, stalled: true, foldedInto: '0' }] })!;
  assert.deepEqual([sent.outcome, sent.outcomeKind], ['built', 'ok']);
  assert.deepEqual([sent.phases[0]!.quietS, sent.phases[0]!.stalled, sent.phases[0]!.foldedInto], [3, true, '0']);
});

test('model nests phases under their parents in id order', () => {
  const m = new BuildTreeModel();
  m.update(payload());
  const roots = m.children(undefined);
  assert.deepEqual(roots, [{ kind: 'build', buildId: 'b1' }]);
  const top = m.children(roots[0]);
  assert.deepEqual(top.map((e) => (e.kind === 'phase' ? e.phaseId : '')), ['0']);
  const kids = m.children(top[0]);
  assert.deepEqual(kids.map((e) => (e.kind === 'phase' ? e.phaseId : '')), ['0.0', '0.1', '0.2', '0.10']);
  assert.equal(m.view(top[0]!)!.collapsible, true);
  assert.equal(m.view(kids[0]!)!.collapsible, false);
});

test('phase parent falls back to the dotted id when parentId is missing', () => {
  const m = new BuildTreeModel();
  m.update(payload({ phases: [phase({ id: '0' }), phase({ id: '0.0' })] }));
  const top = m.children({ kind: 'build', buildId: 'b1' });
  assert.equal(top.length, 1);
  assert.equal(m.children(top[0]).length, 1);
});

test('running build view: description, stop context, status bar', () => {
  const m = new BuildTreeModel();
  m.update(payload());
  const v = m.view({ kind: 'build', buildId: 'b1' })!;
  assert.equal(v.label, 'large');
  assert.equal(v.description, 'building · 4.1 s');
  assert.equal(v.contextValue, 'trtls.build.running');
  assert.equal(v.icon, 'running');
  assert.equal(v.openEvidence, false);
  assert.equal(m.running().length, 1);
  assert.equal(statusBarText(m.running()), '$(sync~spin) TensorRT: building large · 4.1 s');
});

test('phase view renders the server\'s stall rule: quiet text from quietS, the warning from stalled', () => {
  // step is TensorRT's 0-based index of the last completed step
  const p = describePhase(phase({ id: '0.1', name: 'Timing tactics', numSteps: 3, step: 1, elapsedS: 4.1, baselineS: 30, quietForS: 0.3 }), false);
  assert.equal(p.description, '2/3 · 4.1 s · usual 30 s');
  assert.equal(p.icon, 'running');
  // the measured silence alone shows nothing: the server decides when it is worth showing (quietS)
  assert.equal(describePhase(phase({ id: '1', quietForS: 45 }), false).description, '1.0 s');
  // silent, not stalled: the text shows, no warning
  const silent = describePhase(phase({ id: '0.1', numSteps: 3, step: 0, elapsedS: 12, baselineS: 30, quietForS: 12, quietS: 12 }), false);
  assert.equal(silent.description, '1/3 · 12 s · usual 30 s · quiet for 12 s');
  assert.equal(silent.icon, 'running');
  assert.equal(silent.contextValue, 'trtls.phase');
  const q = describePhase(phase({ id: '0.2', quietForS: 45, quietS: 45, stalled: true, baselineS: 30, elapsedS: 75 }), false);
  assert.equal(q.description, '1 min 15 s · usual 30 s · quiet for 45 s');
  assert.equal(q.icon, 'warning');
  assert.equal(q.contextValue, 'trtls.phase.quiet');
  assert.match(q.tooltip, /no progress for 45 s; this phase usually takes 30 s/);
  const done = describePhase(phase({ id: '0.0', numSteps: 4, step: null, status: 'done', elapsedS: 2 }), false);
  assert.equal(done.description, '4/4 · 2.0 s');
  assert.equal(done.icon, 'ok');
});

test('finished builds: cancelled by ide_stop, built with evidence', () => {
  const m = new BuildTreeModel();
  m.update(payload({
    status: 'cancelled', cancelSource: 'ide_stop', outcome: 'cancelled', outcomeKind: 'cancelled', outcomeMessage: 'cancelled by ide_stop',
    evidencePath: '/w/.trtls/b1/summary.json',
  }));
  const v = m.view({ kind: 'build', buildId: 'b1' })!;
  assert.equal(v.description, 'cancelled by ide_stop · 4.1 s');
  assert.equal(v.icon, 'cancelled');
  assert.equal(v.contextValue, 'trtls.build.finished');
  assert.equal(v.openEvidence, true);
  assert.equal(m.running().length, 0);
  assert.equal(statusBarText(m.running()), undefined);
  const built = describeBuild(parseBuildTree(payload({ buildId: 'b2', status: 'built', outcome: 'built', outcomeKind: 'ok', elapsedS: 3.2 }))!);
  assert.equal(built.description, 'built · 3.2 s');
  assert.equal(built.icon, 'ok');
  assert.equal(built.contextValue, 'trtls.build.done');
});

test('a finished build\'s icon is the server\'s outcomeKind, whatever its status text', () => {
  const icon = (status: string, outcomeKind: string | null) =>
    describeBuild(parseBuildTree(payload({ status, outcome: status, outcomeKind }))!).icon;
  assert.equal(icon('forced', 'failed'), 'error');
  assert.equal(icon('killed', 'failed'), 'error');
  assert.equal(icon('failed', 'failed'), 'error');
  assert.equal(icon('cancelled', 'cancelled'), 'cancelled');
  assert.equal(icon('built', 'ok'), 'ok');
  assert.equal(icon('built', null), 'warning', 'no outcomeKind: not shown as a success');
});

test('a late running update does not revive a finished build', () => {
  const m = new BuildTreeModel();
  m.update(payload({ status: 'cancelled', cancelSource: 'ide_stop' }));
  m.update(payload({ status: 'running' }));
  assert.equal(m.get('b1')!.status, 'cancelled');
});

test('newest build first, noteStarted placeholder, pruning keeps running builds', () => {
  const m = new BuildTreeModel(2);
  m.noteStarted('a', 'demo', 'u');
  m.update(payload({ buildId: 'a', engine: 'demo', status: 'built' }));
  m.update(payload({ buildId: 'b', status: 'running' }));
  m.noteStarted('c', 'large', 'u');
  assert.deepEqual(m.all().map((b) => b.buildId), ['c', 'b']);
  m.noteStarted('c', 'other', 'u'); // already known: unchanged
  assert.equal(m.get('c')!.engine, 'large');
  assert.match(statusBarText(m.running())!, /2 builds \(large, large\)/);
});

test('the server\'s folding: phases with one foldedInto are one row, at its first phase; the others stay', () => {
  const m = new BuildTreeModel();
  const reformat = (i: number, foldedInto: string | null, status: 'done' | 'running' = 'done') =>
    phase({ id: `0.${i}`, parentId: '0', name: 'Computing reformatting costs', status, elapsedS: 0.01, foldedInto });
  m.update(payload({ phases: [
    phase({ id: '0', name: 'Timing tensor reformats', numSteps: 47, step: 10 }),
    reformat(0, '0.0'), reformat(1, '0.0'), reformat(2, '0.0'),
    phase({ id: '0.3', parentId: '0', name: 'Other', status: 'done' }),
    reformat(4, '0.0'),
    reformat(5, null, 'running'),
  ] }));
  const top = m.children(m.children(undefined)[0]);
  const kids = m.children(top[0]);
  assert.deepEqual(kids.map((e) => (e.kind === 'phase' ? [e.phaseId, e.foldedIds?.length ?? 0] : [])), [['0.0', 4], ['0.3', 0], ['0.5', 0]]);
  const folded = m.view(kids[0]!)!;
  assert.equal(folded.label, 'Computing reformatting costs ×4');
  assert.equal(folded.description, `${formatSeconds(0.04)} in all`);
  assert.match(folded.tooltip, /phases 0\.0, 0\.1, 0\.2, 0\.4\)/);
  assert.equal(m.view(kids[2]!)!.label, 'Computing reformatting costs');  // the running one is its own row
});

test('siblings the server did not fold are not folded, however alike', () => {
  const m = new BuildTreeModel();
  const x = (i: number) => phase({ id: `0.${i}`, parentId: '0', name: 'x', status: 'done' });
  m.update(payload({ phases: [phase({ id: '0', name: 'root' }), x(0), x(1), x(2), x(3)] }));
  const kids = m.children(m.children(m.children(undefined)[0])[0]);
  assert.equal(kids.length, 4);
});

test('markLost ends running builds as lost (phases failed, no spinner), keeps finished ones, and a late update cannot revive them', () => {
  const m = new BuildTreeModel();
  m.update(payload({ buildId: 'done', engine: 'demo', status: 'built', phases: [] }));
  m.update(payload());
  const lost = m.markLost('the server stopped');
  assert.deepEqual(lost.map((b) => b.buildId), ['b1']);
  assert.equal(m.running().length, 0);
  assert.equal(statusBarText(m.running()), undefined);
  assert.equal(m.get('done')?.status, 'built');
  const b = m.get('b1')!;
  assert.equal(b.status, 'lost');
  assert.equal(b.outcomeMessage, 'the server stopped');
  assert.ok(b.phases.every((p) => p.status !== 'running' && (p.quietForS === null || p.status === 'done')));
  assert.equal(b.phases.find((p) => p.id === '0.0')?.status, 'done');  // finished phases keep their status
  const v = describeBuild(b);
  assert.equal(v.icon, 'warning');
  assert.match(v.description, /^lost \(server stopped\) · 4\.1 s$/);
  assert.equal(v.contextValue, 'trtls.build.done');  // no inline Stop on a lost build
  for (const el of m.children({ kind: 'build', buildId: 'b1' })) assert.notEqual(m.view(el)?.icon, 'running');
  m.update(payload());  // a stray late notification of the dead server
  assert.equal(m.get('b1')?.status, 'lost');
  assert.deepEqual(m.markLost('again'), []);
});

test('the server never sets lost', () => {
  assert.equal(parseBuildTree(payload({ status: 'lost' }))?.status, 'running');
});

// -- build farm: a matrix is one parent with one child per cell ------------------------------------------------
function cellPayload(id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return payload({ buildId: id, engine: 'demo', cell: id.split(':')[1], parentId: 'm1', ...over });
}

test('a matrix parent lists one child per cell: status, node, GPU, and the cell\'s own phases', () => {
  const m = new BuildTreeModel();
  const node = { nodeId: 'ab12cd34ef56aa', hostname: 'gpu-3', labels: { 'trtls/cc': 'SM89', 'ray.io/node-id': 'x' },
    acceleratorType: 'L4', gpuIds: ['1'], queueWaitS: 2.5 };
  m.update(cellPayload('c:o0-SM89', { node }));
  m.update(cellPayload('c:o0-SM120', { status: 'waiting for a node', phases: [], node: { waitingS: 4.2 } }));
  m.update({
    buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'running', elapsedS: 9, cells: [
      { buildId: 'c:o0-SM89', cell: 'o0-SM89', status: 'running', node },
      { buildId: 'c:o0-SM120', cell: 'o0-SM120', status: 'waiting for a node', node: { waitingS: 4.2 } },
      { buildId: null, cell: 'demo/o1-SM89', status: 'not started' },
    ],
  });
  const top = m.children(undefined);
  assert.deepEqual(top, [{ kind: 'build', buildId: 'm1' }], 'cells are not top-level rows');
  const cells = m.children(top[0]);
  assert.deepEqual(cells.map((c) => c.kind), ['build', 'build', 'pendingCell']);
  const parent = m.view(top[0]!)!;
  assert.equal(parent.label, 'demo matrix');
  assert.match(parent.description, /^0\/3 cells · building/);
  assert.equal(parent.contextValue, 'trtls.build.running', 'Stop on the parent stops every cell');
  const placed = m.view(cells[0]!)!;
  assert.equal(placed.label, 'o0-SM89');
  assert.match(placed.description, /node gpu-3 \(ab12cd34ef56\) · GPU 1 · L4 · waited 2\.5 s/);
  assert.match(placed.tooltip, /labels: trtls\/cc=SM89$/);
  assert.equal(placed.contextValue, 'trtls.build.running', 'Stop on a cell stops that cell');
  assert.ok(m.children(cells[0]).length > 0, 'the cell\'s phase tree is under it');
  const waiting = m.view(cells[1]!)!;
  assert.equal(waiting.description, 'waiting for a node 4.2 s');
  assert.equal(waiting.icon, 'pending');
  assert.equal(m.view(cells[2]!)!.description, 'not started');
  assert.equal(m.running().length, 1, 'the status bar counts the matrix once, not each cell');
});

test('a finished matrix shows the server\'s outcome and keeps its cells; a late running row does not revive it', () => {
  const m = new BuildTreeModel();
  m.update(cellPayload('c:a', { status: 'killed', outcome: 'killed', outcomeKind: 'failed',
    outcomeMessage: 'killed: node lost: gpu-3 (ab12cd34ef56) died during the build', node: { nodeId: 'ab12cd34ef56', hostname: 'gpu-3' } }));
  m.update({ buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'killed', outcome: 'killed', outcomeKind: 'failed',
    outcomeMessage: '1 killed', evidencePath: '/w/.trtls/runs/m1/summary.json',
    cells: [{ buildId: 'c:a', cell: 'a', status: 'killed' }] });
  m.update({ buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'running', cells: [] });
  const v = m.view({ kind: 'build', buildId: 'm1' })!;
  assert.equal(v.icon, 'error');
  assert.match(v.description, /^1\/1 cells · 1 killed/);
  assert.equal(v.openEvidence, true);
  const cell = m.view({ kind: 'build', buildId: 'c:a' })!;
  assert.match(cell.tooltip, /node lost/);
  assert.equal(cell.icon, 'error');
});

test('a farm cell\'s phasesDelta is merged into the phases held, by id; a whole tree replaces them', () => {
  const m = new BuildTreeModel();
  m.update(payload());
  const delta = m.update(payload({
    phasesDelta: true,
    phases: [phase({ id: '0.1', parentId: '0', name: 'Timing tactics', numSteps: 3, step: 2, status: 'done', elapsedS: 9 }),
      phase({ id: '0.3', parentId: '0', name: 'New one' })],
  }))!;
  const ids = delta.phases.map((p) => p.id).sort(comparePhaseIds);
  assert.deepEqual(ids, ['0', '0.0', '0.1', '0.2', '0.3', '0.10']);  // nothing held was dropped, the new one added
  assert.equal(delta.phases.find((p) => p.id === '0.1')!.status, 'done');  // the changed one replaced
  assert.equal(delta.phasesDelta, false);
  const whole = m.update(payload({ phases: [phase({ id: '0', name: 'Building engine' })] }))!;
  assert.deepEqual(whole.phases.map((p) => p.id), ['0']);  // no phasesDelta: the list is the whole tree
});
