import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { BuildTreeModel, describeBuild, describePhase, parseBuildTree, PhaseRow, statusBarText } from '../src/buildTree';
import { BUILD_OUTCOMES, OUTCOME_KINDS, PHASE_STATUSES } from '../src/generated/protocol';

// Payloads as the server sends them: the words (detail, description, groupLabel …) are trtls.core.display's, and the
// model must show them verbatim. Where a test's words look odd, that is on purpose: nothing is recomputed here.
function phase(over: Partial<PhaseRow> & { id: string }): PhaseRow {
  return {
    parentId: null, name: `phase ${over.id}`, numSteps: 1, step: null, status: 'running', elapsedS: 1, startS: 0, baselineS: null,
    quietForS: null, quietS: null, stalled: false, foldedInto: null, stepsText: '0/1', detail: `server words for ${over.id}`,
    groupLabel: null, groupDetail: null, ...over,
  };
}

function payload(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    buildId: 'b1', engine: 'large', uri: 'file:///w/trtls.toml', status: 'running', running: true, cancelSource: null,
    outcome: null, outcomeKind: null, outcomeMessage: null, elapsedS: 4.12, elapsedText: '4.1 s', description: 'building · 4.1 s',
    where: 'local', evidencePath: null, cell: null, parentId: null, node: null,
    phases: [
      phase({ id: '0', name: 'Building engine', numSteps: 3, step: 0 }),
      phase({ id: '0.0', parentId: '0', name: 'Parsing', numSteps: 1, step: 1, status: 'done', elapsedS: 0.2 }),
      phase({ id: '0.1', parentId: '0', name: 'Timing tactics', numSteps: 3, step: 2, elapsedS: 4.1, baselineS: 30 }),
      phase({ id: '0.2', parentId: '0', name: 'Quiet one', quietForS: 45, quietS: 45, stalled: true, baselineS: 30, elapsedS: 75 }),
      phase({ id: '0.10', parentId: '0', name: 'Later', numSteps: 0 }),
    ],
    ...over,
  };
}

function finished(outcome: string, outcomeKind: string | null, over: Record<string, unknown> = {}): Record<string, unknown> {
  return payload({ status: outcome, running: false, outcome, outcomeKind, description: `${outcome} words`, ...over });
}

test('children are shown in the order the server sent them (its start order), never re-sorted by id', () => {
  const m = new BuildTreeModel();
  // Start order that a numeric sort of the ids would change: 0.10 started before 0.2 here.
  m.update(payload({ phases: [phase({ id: '0', name: 'Building engine' }), phase({ id: '0.10', parentId: '0', name: 'A' }),
    phase({ id: '0.2', parentId: '0', name: 'B' })] }));
  const kids = m.children({ kind: 'phase', buildId: 'b1', phaseId: '0' });
  assert.deepEqual(kids.map((k) => (k.kind === 'phase' ? k.phaseId : '')), ['0.10', '0.2']);
});

test('parseBuildTree rejects garbage and keeps the server\'s words', () => {
  assert.equal(parseBuildTree(null), undefined);
  assert.equal(parseBuildTree({ engine: 'x' }), undefined);
  const p = parseBuildTree({ buildId: 'x', status: 'weird', phases: [{ id: '0', detail: '2/3 · 4.1 s' }, 5] })!;
  assert.equal(p.status, 'running');
  assert.equal(p.phases.length, 1);
  assert.equal(p.phases[0]!.name, '0');
  assert.equal(p.phases[0]!.detail, '2/3 · 4.1 s');
  assert.equal(p.phases[0]!.stalled, false);
  assert.equal(p.outcomeKind, null);
  assert.equal(parseBuildTree({ buildId: 'x', outcomeKind: 'great' })!.outcomeKind, null, 'an unknown kind is not trusted');
  assert.equal(parseBuildTree({ buildId: 'x', running: false, outcome: 'built' })!.status, 'built');
  assert.equal(parseBuildTree({ buildId: 'x', running: false, outcome: 'splendid' })!.status, 'failed', 'an ended build of no known outcome is no success');
  assert.equal(parseBuildTree({ buildId: 'x', status: 'stopping', running: true })!.status, 'running', 'the server says it runs');
});

test('model nests phases under their parents in the server\'s (start) order', () => {
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

test('a phase without a parent is a root: the parent is the server\'s parentId, never read from the dotted id', () => {
  const m = new BuildTreeModel();
  m.update(payload({ phases: [phase({ id: '0' }), phase({ id: '0.0' })] }));
  assert.equal(m.children({ kind: 'build', buildId: 'b1' }).length, 2);
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
  assert.equal(statusBarText(m.running()), '$(sync~spin) TensorRT: large · building · 4.1 s');
});

test('a phase row is the server\'s detail; the icon and the context follow its stall flag', () => {
  const p = describePhase(phase({ id: '0.1', name: 'Timing tactics', detail: '2/3 · 4.1 s · usual 30 s' }), false);
  assert.equal(p.description, '2/3 · 4.1 s · usual 30 s');
  assert.equal(p.icon, 'running');
  const q = describePhase(phase({ id: '0.2', stalled: true, detail: '1 min 15 s · quiet 45 s · usual 30 s · stalled' }), false);
  assert.equal(q.description, '1 min 15 s · quiet 45 s · usual 30 s · stalled');
  assert.equal(q.icon, 'warning');
  assert.equal(q.contextValue, 'trtls.phase.quiet');
  assert.match(q.tooltip, /stalled/);
  const done = describePhase(phase({ id: '0.0', status: 'done', detail: '2.0 s' }), false);
  assert.equal(done.description, '2.0 s');
  assert.equal(done.icon, 'ok');
});

test('finished builds: cancelled by ide_stop, built with evidence', () => {
  const m = new BuildTreeModel();
  m.update(finished('cancelled', 'cancelled', { cancelSource: 'ide_stop', description: 'cancelled by ide_stop · 4.1 s',
    evidencePath: '/w/.trtls/b1/summary.json' }));
  const v = m.view({ kind: 'build', buildId: 'b1' })!;
  assert.equal(v.description, 'cancelled by ide_stop · 4.1 s');
  assert.equal(v.icon, 'cancelled');
  assert.equal(v.contextValue, 'trtls.build.finished');
  assert.equal(v.openEvidence, true);
  assert.equal(m.running().length, 0);
  assert.equal(statusBarText(m.running()), undefined);
  const built = describeBuild(parseBuildTree(finished('built', 'ok', { buildId: 'b2', description: 'built · 3.2 s' }))!);
  assert.equal(built.description, 'built · 3.2 s');
  assert.equal(built.icon, 'ok');
  assert.equal(built.contextValue, 'trtls.build.done');
});

test('a finished build\'s icon is the server\'s outcomeKind, whatever its status text', () => {
  const icon = (status: string, outcomeKind: string | null) => describeBuild(parseBuildTree(finished(status, outcomeKind))!).icon;
  assert.equal(icon('forced', 'failed'), 'error');
  assert.equal(icon('killed', 'failed'), 'error');
  assert.equal(icon('failed', 'failed'), 'error');
  assert.equal(icon('cancelled', 'cancelled'), 'cancelled');
  assert.equal(icon('built', 'ok'), 'ok');
  assert.equal(icon('built', null), 'warning', 'no outcomeKind: not shown as a success');
});

test('every word of the generated vocabularies is read as sent, and only those', () => {
  for (const outcome of BUILD_OUTCOMES) {
    assert.equal(parseBuildTree({ buildId: 'x', running: false, outcome })!.status, outcome);
  }
  for (const kind of OUTCOME_KINDS) {
    assert.equal(parseBuildTree({ buildId: 'x', outcomeKind: kind })!.outcomeKind, kind);
  }
  for (const status of PHASE_STATUSES) {
    const p = parseBuildTree({ buildId: 'x', phases: [{ id: '0', status }] })!.phases[0]!;
    assert.equal(p.status, status);
    assert.notEqual(describePhase(p, false).icon, undefined, `phase status ${status} has an icon`);
  }
  assert.equal(parseBuildTree({ buildId: 'x', phases: [{ id: '0', status: 'paused' }] })!.phases[0]!.status, 'running');
});

test('a late running update does not revive a finished build', () => {
  const m = new BuildTreeModel();
  m.update(finished('cancelled', 'cancelled', { cancelSource: 'ide_stop' }));
  m.update(payload());
  assert.equal(m.get('b1')!.status, 'cancelled');
});

test('newest build first, noteStarted placeholder, pruning keeps running builds', () => {
  const m = new BuildTreeModel(2);
  m.noteStarted('a', 'demo', 'u');
  m.update(finished('built', 'ok', { buildId: 'a', engine: 'demo' }));
  m.update(payload({ buildId: 'b' }));
  m.noteStarted('c', 'large', 'u');
  assert.deepEqual(m.all().map((b) => b.buildId), ['c', 'b']);
  m.noteStarted('c', 'other', 'u'); // already known: unchanged
  assert.equal(m.get('c')!.engine, 'large');
  assert.match(statusBarText(m.running())!, /2 builds \(large, large\)/);
});

test('the server\'s folding: phases with one foldedInto are one row, at its first phase; the others stay', () => {
  const m = new BuildTreeModel();
  const reformat = (i: number, foldedInto: string | null, status: 'done' | 'running' = 'done') =>
    phase({ id: `0.${i}`, parentId: '0', name: 'Computing reformatting costs', status, elapsedS: 0.01, foldedInto,
      ...(i === 0 ? { groupLabel: 'Computing reformatting costs ×4', groupDetail: '0.0 s in all' } : {}) });
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
  assert.equal(folded.description, '0.0 s in all', 'the server\'s words for the row');
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
  m.update(finished('built', 'ok', { buildId: 'done', engine: 'demo', phases: [] }));
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
  assert.equal(v.description, 'lost (server stopped)');
  assert.equal(v.contextValue, 'trtls.build.done');  // no inline Stop on a lost build
  for (const el of m.children({ kind: 'build', buildId: 'b1' })) assert.notEqual(m.view(el)?.icon, 'running');
  m.update(payload());  // a stray late notification of the dead server
  assert.equal(m.get('b1')?.status, 'lost');
  assert.deepEqual(m.markLost('again'), []);
});

test('the server never sets lost', () => {
  assert.equal(parseBuildTree(payload({ status: 'lost' }))?.status, 'running');
  assert.equal(parseBuildTree(finished('lost', null))?.status, 'failed');
});

// -- build farm: a matrix is one parent with one child per cell ------------------------------------------------
function cellPayload(id: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return payload({ buildId: id, engine: 'demo', cell: id.split(':')[1], parentId: 'm1', ...over });
}

test('a matrix parent lists one child per cell: the server\'s count, where each cell runs, and its own phases', () => {
  const m = new BuildTreeModel();
  const node = { nodeId: 'ab12cd34ef56aa', hostname: 'gpu-3', labels: { 'trtls/cc': 'SM89' }, acceleratorType: 'L4', gpuIds: ['1'], queueWaitS: 2.5 };
  const placedWhere = 'node gpu-3 (ab12cd34ef56) · GPU 1 · L4 · waited 2.5 s';
  m.update(cellPayload('c:o0-SM89', { node, where: placedWhere, description: `building · 4.1 s · ${placedWhere}` }));
  m.update(cellPayload('c:o0-SM120', { status: 'waiting for a node', phases: [], node: { waitingS: 4.2 },
    where: 'waiting for a node 4.2 s', description: 'waiting for a node 4.2 s' }));
  m.update({
    buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'running', running: true, elapsedS: 9,
    cellsText: '0/3 cells done', description: '0/3 cells done · building · 9.0 s', cells: [
      { buildId: 'c:o0-SM89', cell: 'o0-SM89', engine: 'demo', status: 'running', description: 'x', node },
      { buildId: 'c:o0-SM120', cell: 'o0-SM120', engine: 'demo', status: 'waiting for a node', description: 'y', node: { waitingS: 4.2 } },
      { buildId: null, cell: 'demo/o1-SM89', engine: 'demo', status: 'not started', description: 'not started',
        message: 'demo/o1-SM89: not started (the run was stopped first)' },
    ],
  });
  const top = m.children(undefined);
  assert.deepEqual(top, [{ kind: 'build', buildId: 'm1' }], 'cells are not top-level rows');
  const cells = m.children(top[0]);
  assert.deepEqual(cells.map((c) => c.kind), ['build', 'build', 'pendingCell']);
  const parent = m.view(top[0]!)!;
  assert.equal(parent.label, 'demo matrix');
  assert.equal(parent.description, '0/3 cells done · building · 9.0 s', 'the count is the server\'s, never recounted');
  assert.equal(parent.contextValue, 'trtls.build.running', 'Stop on the parent stops every cell');
  const placed = m.view(cells[0]!)!;
  assert.equal(placed.label, 'o0-SM89');
  assert.equal(placed.description, `building · 4.1 s · ${placedWhere}`);
  assert.match(placed.tooltip, /where: node gpu-3/);
  assert.equal(placed.contextValue, 'trtls.build.running', 'Stop on a cell stops that cell');
  assert.ok(m.children(cells[0]).length > 0, 'the cell\'s phase tree is under it');
  const waiting = m.view(cells[1]!)!;
  assert.equal(waiting.description, 'waiting for a node 4.2 s');
  assert.equal(waiting.icon, 'pending');
  assert.equal(m.view(cells[2]!)!.description, 'not started');
  assert.equal(m.view(cells[2]!)!.tooltip, 'demo/o1-SM89: not started (the run was stopped first)', 'the server\'s words');
  assert.equal(m.running().length, 1, 'the status bar counts the matrix once, not each cell');
});

test('a finished matrix shows the server\'s outcome and keeps its cells; a late running row does not revive it', () => {
  const m = new BuildTreeModel();
  m.update(cellPayload('c:a', { status: 'killed', running: false, outcome: 'killed', outcomeKind: 'failed',
    outcomeMessage: 'killed: node lost: gpu-3 (ab12cd34ef56) died during the build', node: { nodeId: 'ab12cd34ef56', hostname: 'gpu-3' } }));
  m.update({ buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'killed', running: false, outcome: 'killed', outcomeKind: 'failed',
    outcomeMessage: '1 killed', description: '1/1 cells done · 1 killed · 12 s', evidencePath: '/w/.trtls/runs/m1/summary.json',
    cells: [{ buildId: 'c:a', cell: 'a', engine: 'demo', status: 'killed', description: 'killed' }] });
  m.update({ buildId: 'm1', engine: 'demo matrix', kind: 'matrix', status: 'running', running: true, cells: [] });
  const v = m.view({ kind: 'build', buildId: 'm1' })!;
  assert.equal(v.icon, 'error');
  assert.equal(v.description, '1/1 cells done · 1 killed · 12 s');
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
  const ids = delta.phases.map((p) => p.id);
  // nothing held was dropped, each changed one kept its place, the new one added after
  assert.deepEqual(ids, ['0', '0.0', '0.1', '0.2', '0.10', '0.3']);
  assert.equal(delta.phases.find((p) => p.id === '0.1')!.status, 'done');  // the changed one replaced
  assert.equal(delta.phasesDelta, false);
  const whole = m.update(payload({ phases: [phase({ id: '0', name: 'Building engine' })] }))!;
  assert.deepEqual(whole.phases.map((p) => p.id), ['0']);  // no phasesDelta: the list is the whole tree
});

test('a running build\'s row, tooltip and status bar carry the server\'s time left verbatim; a finished one none', () => {
  const m = new BuildTreeModel();
  m.update(payload({ timeLeft: '~40 s left, 25–90 s, from 3 similar builds' }));
  const v = describeBuild(m.get('b1')!);
  assert.equal(v.description, 'building · 4.1 s · ~40 s left, 25–90 s, from 3 similar builds');
  assert.match(v.tooltip, /^large: building · 4\.1 s · ~40 s left, 25–90 s, from 3 similar builds/);
  assert.equal(statusBarText(m.running()), '$(sync~spin) TensorRT: large · building · 4.1 s · ~40 s left, 25–90 s, from 3 similar builds');
  m.update(finished('built', 'ok', { timeLeft: 'no estimate' }));
  assert.equal(describeBuild(m.get('b1')!).description, 'built words');
  assert.equal(parseBuildTree(payload())!.timeLeft, null);  // a server that sends none: the row as before
});
