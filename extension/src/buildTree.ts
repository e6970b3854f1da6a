// Model of the "TensorRT Builds" tree, fed by the server's `trtls/buildTree` notification.
// Pure TypeScript (no vscode import) so it is unit-tested without VS Code. It renders what the server decided:
// the stall rule (`quietS`, `stalled`), the folding rule (`foldedInto`) and the outcome (`outcomeKind`) are
// computed once in Python (trtls.core.phase_tree, trtls.core.outcome) and never re-derived here.
import { formatSeconds } from './format';

/** `lost` is the client's own: the build was running when the server process died (never sent by the server). */
export type BuildStatus = 'running' | 'built' | 'cancelled' | 'failed' | 'forced' | 'killed' | 'lost';
export type PhaseStatus = 'running' | 'done' | 'cancelled' | 'failed';

export interface PhasePayload {
  id: string;
  parentId: string | null;
  name: string;
  numSteps: number;
  step: number | null;
  status: PhaseStatus;
  elapsedS: number;
  baselineS: number | null;
  /** The builder's silence, measured, on every running phase. */
  quietForS: number | null;
  /** The same silence when the server says it is worth showing, else null. */
  quietS: number | null;
  /** Silent longer than this phase usually takes (the server's stall rule). */
  stalled: boolean;
  /** Id of the first phase of the folded row this phase is shown in (the server's folding rule), else null. */
  foldedInto: string | null;
}

/** How a finished build ended, as the server classifies it; `lost` is the client's own (see BuildStatus). */
export type OutcomeKind = 'ok' | 'cancelled' | 'failed' | 'refused';

/** Where a remote (build farm) cell is: the node that holds it, or how long it has waited for one. */
export interface NodeInfo {
  nodeId: string | null;
  hostname: string | null;
  labels: Record<string, string>;
  acceleratorType: string | null;
  gpuIds: string[];
  queueWaitS: number | null;
  /** Set while no node holds the cell yet ("waiting for a node"). */
  waitingS: number | null;
}

/** One cell as a matrix parent lists it (the cell's own notification carries its phases). */
export interface CellRow {
  buildId: string | null;
  cell: string;
  status: string;
  message: string | null;
  node: NodeInfo | null;
}

export interface BuildTreePayload {
  buildId: string;
  engine: string;
  /** `matrix` for the parent of a matrix or farm run (its children are its cells). */
  kind: 'build' | 'matrix';
  /** The matrix this build is a cell of, and the cell's name. */
  parentId: string | null;
  cell: string | null;
  node: NodeInfo | null;
  /** The server's own word while running: "starting", "waiting for a node", "running", "stopping". */
  phaseText: string | null;
  cells: CellRow[];
  uri: string;
  status: BuildStatus;
  cancelSource: string | null;
  outcome: string | null;
  outcomeKind: OutcomeKind | null;
  outcomeMessage: string | null;
  elapsedS: number;
  evidencePath: string | null;
  phases: PhasePayload[];
  /** `phases` holds only the phases that changed since this build's previous notification (a farm cell). */
  phasesDelta?: boolean;
}

export const BUILD_TREE_NOTIFICATION = 'trtls/buildTree';

const BUILD_STATUSES: readonly string[] = ['running', 'built', 'cancelled', 'failed', 'forced', 'killed'];
const PHASE_STATUSES: readonly string[] = ['running', 'done', 'cancelled', 'failed'];
const OUTCOME_KINDS: readonly string[] = ['ok', 'cancelled', 'failed', 'refused'];

/** Statuses the server sends while a build or a matrix still runs; the model keeps them as `running`. */
const RUNNING_WORDS: readonly string[] = ['starting', 'waiting for a node', 'running', 'stopping'];

export function parseNode(v: unknown): NodeInfo | null {
  if (!isObj(v)) return null;
  const labels: Record<string, string> = {};
  if (isObj(v.labels)) {
    for (const [k, x] of Object.entries(v.labels)) if (typeof x === 'string') labels[k] = x;
  }
  return {
    nodeId: strOrNull(v.nodeId),
    hostname: strOrNull(v.hostname),
    labels,
    acceleratorType: strOrNull(v.acceleratorType),
    gpuIds: Array.isArray(v.gpuIds) ? v.gpuIds.filter((g): g is string => typeof g === 'string') : [],
    queueWaitS: numOrNull(v.queueWaitS),
    waitingS: numOrNull(v.waitingS),
  };
}

function parseCells(v: unknown): CellRow[] {
  if (!Array.isArray(v)) return [];
  const out: CellRow[] = [];
  for (const c of v) {
    if (!isObj(c) || typeof c.cell !== 'string') continue;
    out.push({
      buildId: strOrNull(c.buildId),
      cell: c.cell,
      status: typeof c.status === 'string' ? c.status : 'running',
      message: strOrNull(c.message),
      node: parseNode(c.node),
    });
  }
  return out;
}

export function parseOutcomeKind(v: unknown): OutcomeKind | null {
  return typeof v === 'string' && OUTCOME_KINDS.includes(v) ? (v as OutcomeKind) : null;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function num(v: unknown, dflt: number): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : dflt;
}
function numOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}
function strOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** Validates and normalises one notification payload; returns undefined if it is unusable. */
export function parseBuildTree(raw: unknown): BuildTreePayload | undefined {
  if (!isObj(raw) || typeof raw.buildId !== 'string' || raw.buildId === '') {
    return undefined;
  }
  const status = typeof raw.status === 'string' && BUILD_STATUSES.includes(raw.status) ? (raw.status as BuildStatus) : 'running';
  const phaseText = typeof raw.status === 'string' && RUNNING_WORDS.includes(raw.status) ? raw.status : null;
  const phases: PhasePayload[] = [];
  if (Array.isArray(raw.phases)) {
    for (const p of raw.phases) {
      if (!isObj(p) || typeof p.id !== 'string') {
        continue;
      }
      phases.push({
        id: p.id,
        parentId: strOrNull(p.parentId),
        name: typeof p.name === 'string' ? p.name : p.id,
        numSteps: num(p.numSteps, 0),
        step: numOrNull(p.step),
        status: typeof p.status === 'string' && PHASE_STATUSES.includes(p.status) ? (p.status as PhaseStatus) : 'running',
        elapsedS: num(p.elapsedS, 0),
        baselineS: numOrNull(p.baselineS),
        quietForS: numOrNull(p.quietForS),
        quietS: numOrNull(p.quietS),
        stalled: p.stalled === true,
        foldedInto: strOrNull(p.foldedInto),
      });
    }
  }
  return {
    buildId: raw.buildId,
    engine: typeof raw.engine === 'string' ? raw.engine : '?',
    kind: raw.kind === 'matrix' ? 'matrix' : 'build',
    parentId: strOrNull(raw.parentId),
    cell: strOrNull(raw.cell),
    node: parseNode(raw.node),
    phaseText,
    cells: parseCells(raw.cells),
    uri: typeof raw.uri === 'string' ? raw.uri : '',
    status,
    cancelSource: strOrNull(raw.cancelSource),
    outcome: strOrNull(raw.outcome),
    outcomeKind: parseOutcomeKind(raw.outcomeKind),
    outcomeMessage: strOrNull(raw.outcomeMessage),
    elapsedS: num(raw.elapsedS, 0),
    evidencePath: strOrNull(raw.evidencePath),
    phases,
    phasesDelta: raw.phasesDelta === true,
  };
}

/** A delta's phases merged into the ones held: replaced by id, new ones added. */
export function mergePhases(held: PhasePayload[], delta: PhasePayload[]): PhasePayload[] {
  const byId = new Map(held.map((p) => [p.id, p]));
  for (const p of delta) byId.set(p.id, p);
  return [...byId.values()];
}

/** Compares dotted phase ids numerically ("0.10" after "0.9"). */
export function comparePhaseIds(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x !== y) return (Number.isNaN(x) || Number.isNaN(y)) ? String(x).localeCompare(String(y)) : x - y;
  }
  return 0;
}

/** The parent of a phase: its parentId, else derived from the dotted id. */
function parentOf(p: PhasePayload): string | null {
  if (p.parentId !== null) {
    return p.parentId;
  }
  const dot = p.id.lastIndexOf('.');
  return dot < 0 ? null : p.id.slice(0, dot);
}

export type TreeElement =
  | { kind: 'build'; buildId: string }
  | { kind: 'pendingCell'; buildId: string; cell: string }
  | { kind: 'phase'; buildId: string; phaseId: string; foldedIds?: string[] };

export type IconKind = 'running' | 'ok' | 'cancelled' | 'error' | 'warning' | 'pending';

export interface ElementView {
  label: string;
  description: string;
  tooltip: string;
  icon: IconKind;
  contextValue: string;
  collapsible: boolean;
  /** Command to run when the element is clicked (finished builds open their evidence). */
  openEvidence: boolean;
}

export function isFinished(status: BuildStatus): boolean {
  return status !== 'running';
}

export class BuildTreeModel {
  /** Insertion order = start order. */
  private readonly builds = new Map<string, BuildTreePayload>();
  private readonly maxBuilds: number;

  constructor(maxBuilds = 20) {
    this.maxBuilds = maxBuilds;
  }

  /** Applies a notification; returns the build it changed, or undefined if it was rejected. */
  update(raw: unknown): BuildTreePayload | undefined {
    const p = parseBuildTree(raw);
    if (p === undefined) {
      return undefined;
    }
    const prev = this.builds.get(p.buildId);
    // A late "running" update must not bring a finished build back to life.
    if (prev !== undefined && isFinished(prev.status) && p.status === 'running') {
      return prev;
    }
    if (p.phasesDelta) {
      // Without the earlier phases (the row arrived first) the delta is still the best known; the server sends the
      // whole tree again within seconds.
      p.phases = mergePhases(prev?.phases ?? [], p.phases);
      p.phasesDelta = false;
    }
    this.builds.set(p.buildId, p);
    this.prune();
    return p;
  }

  /** Marks a build as started before its first notification (the server answered `started`). */
  noteStarted(buildId: string, engine: string, uri: string): void {
    if (!this.builds.has(buildId)) {
      this.builds.set(buildId, {
        buildId, engine, kind: 'build', parentId: null, cell: null, node: null, phaseText: null, cells: [],
        uri, status: 'running', cancelSource: null, outcome: null, outcomeKind: null, outcomeMessage: null,
        elapsedS: 0, evidencePath: null, phases: [],
      });
      this.prune();
    }
  }

  private prune(): void {
    const tops = () => [...this.builds.values()].filter((b) => b.parentId === null);
    while (tops().length > this.maxBuilds) {
      const oldestFinished = tops().find((b) => isFinished(b.status));
      if (oldestFinished === undefined) {
        break;
      }
      this.builds.delete(oldestFinished.buildId);
      for (const c of [...this.builds.values()]) {  // a matrix goes with its cells
        if (c.parentId === oldestFinished.buildId) this.builds.delete(c.buildId);
      }
    }
  }

  clear(): void {
    this.builds.clear();
  }

  /**
   * The server died (crash, kill): its running builds will never send their end. They end here as `lost`, their
   * running phases as failed (as the server's orphan recovery records them), so nothing spins forever.
   * Finished builds stay. Returns the builds it ended.
   */
  markLost(message: string): BuildTreePayload[] {
    const lost: BuildTreePayload[] = [];
    for (const b of this.builds.values()) {
      if (b.status !== 'running') continue;
      b.status = 'lost';
      b.outcomeMessage = message;
      b.phases = b.phases.map((p) => (p.status === 'running' ? { ...p, status: 'failed', quietForS: null, quietS: null, stalled: false } : p));
      lost.push(b);
    }
    return lost;
  }

  get(buildId: string): BuildTreePayload | undefined {
    return this.builds.get(buildId);
  }

  /** Newest first: builds and matrices, not the cells (they are under their matrix). */
  all(): BuildTreePayload[] {
    return [...this.builds.values()].filter((b) => b.parentId === null).reverse();
  }

  running(): BuildTreePayload[] {
    return this.all().filter((b) => b.status === 'running');
  }

  /** A matrix's cells in the order the server lists them (one child per cell, started or not). */
  cellsOf(matrixId: string): TreeElement[] {
    const m = this.builds.get(matrixId);
    if (m === undefined) return [];
    const out: TreeElement[] = [];
    const listed = new Set<string>();
    for (const row of m.cells) {
      if (row.buildId !== null) {
        listed.add(row.buildId);
        if (!this.builds.has(row.buildId)) {  // the row arrived before the cell's own notification
          this.builds.set(row.buildId, {
            buildId: row.buildId, engine: m.engine, kind: 'build', parentId: matrixId, cell: row.cell, node: row.node,
            phaseText: row.status, cells: [], uri: m.uri, status: 'running', cancelSource: null, outcome: null,
            outcomeKind: null, outcomeMessage: row.message, elapsedS: 0, evidencePath: null, phases: [],
          });
        }
        out.push({ kind: 'build', buildId: row.buildId });
      } else {
        out.push({ kind: 'pendingCell', buildId: matrixId, cell: row.cell });
      }
    }
    for (const b of this.builds.values()) {
      if (b.parentId === matrixId && !listed.has(b.buildId)) out.push({ kind: 'build', buildId: b.buildId });
    }
    return out;
  }

  phase(buildId: string, phaseId: string): PhasePayload | undefined {
    return this.builds.get(buildId)?.phases.find((p) => p.id === phaseId);
  }

  children(el: TreeElement | undefined): TreeElement[] {
    if (el === undefined) {
      return this.all().map((b) => ({ kind: 'build', buildId: b.buildId }));
    }
    const b = this.builds.get(el.buildId);
    if (b === undefined || el.kind === 'pendingCell') {
      return [];
    }
    if (el.kind === 'build' && b.kind === 'matrix') {
      return this.cellsOf(b.buildId);
    }
    const parentId = el.kind === 'build' ? null : el.phaseId;
    const kids = b.phases.filter((p) => parentOf(p) === parentId).sort((x, y) => comparePhaseIds(x.id, y.id));
    // The server folds: phases with the same foldedInto are one row, shown where its first phase is.
    const out: TreeElement[] = [];
    for (const p of kids) {
      if (p.foldedInto === null) {
        out.push({ kind: 'phase', buildId: b.buildId, phaseId: p.id });
      } else if (p.foldedInto === p.id) {
        const foldedIds = kids.filter((x) => x.foldedInto === p.id).map((x) => x.id);
        out.push({ kind: 'phase', buildId: b.buildId, phaseId: p.id, foldedIds });
      }
    }
    return out;
  }

  view(el: TreeElement): ElementView | undefined {
    const b = this.builds.get(el.buildId);
    if (b === undefined) {
      return undefined;
    }
    if (el.kind === 'pendingCell') {
      return {
        label: el.cell, description: 'not started', tooltip: `${el.cell}: not started (the run was stopped first)`,
        icon: 'pending', contextValue: 'trtls.cell.pending', collapsible: false, openEvidence: false,
      };
    }
    if (el.kind === 'build' && b.kind === 'matrix') {
      return describeMatrix(b);
    }
    if (el.kind === 'build' && b.parentId !== null) {
      return describeCell(b);
    }
    if (el.kind === 'build') {
      return describeBuild(b);
    }
    const p = b.phases.find((x) => x.id === el.phaseId);
    if (p === undefined) {
      return undefined;
    }
    if (el.foldedIds !== undefined) {
      const group = b.phases.filter((x) => el.foldedIds!.includes(x.id));
      const total = group.reduce((sum, x) => sum + x.elapsedS, 0);
      return {
        label: `${p.name} ×${group.length}`,
        description: `${formatSeconds(total)} in all`,
        tooltip: `${group.length} phases named "${p.name}", all done (phases ${el.foldedIds.join(', ')})`,
        icon: 'ok',
        contextValue: 'trtls.phase',
        collapsible: false,
        openEvidence: false,
      };
    }
    const hasChildren = b.phases.some((x) => parentOf(x) === p.id);
    return describePhase(p, hasChildren);
  }
}

const STATUS_TEXT: Record<BuildStatus, string> = {
  running: 'building',
  built: 'built',
  cancelled: 'cancelled',
  failed: 'failed',
  forced: 'forced',
  killed: 'killed',
  lost: 'lost (server stopped)',
};

export function describeBuild(b: BuildTreePayload): ElementView {
  let status = STATUS_TEXT[b.status];
  if (b.status === 'cancelled' && b.cancelSource) {
    status = `cancelled by ${b.cancelSource}`;
  }
  const icon: IconKind = b.status === 'running' ? 'running' : outcomeIcon(b.outcomeKind);
  const lines = [`${b.engine}: ${status}`, `elapsed ${formatSeconds(b.elapsedS)}`];
  if (b.outcomeMessage) lines.push(b.outcomeMessage);
  if (b.evidencePath) lines.push(`evidence: ${b.evidencePath}`);
  lines.push(`build ${b.buildId}`);
  return {
    label: b.engine,
    description: `${status} · ${formatSeconds(b.elapsedS)}`,
    tooltip: lines.join('\n'),
    icon,
    contextValue: b.status === 'running' ? 'trtls.build.running' : b.evidencePath ? 'trtls.build.finished' : 'trtls.build.done',
    collapsible: b.phases.length > 0,
    openEvidence: b.status !== 'running' && b.evidencePath !== null,
  };
}

/** `node gpu-host-3 (1a2b3c4d5e6f) · GPU 0 · L4 · waited 2.1 s`, or `waiting for a node 4.0 s`. */
export function describeNode(n: NodeInfo | null): string {
  if (n === null) return 'local';
  if (n.nodeId === null) return n.waitingS !== null ? `waiting for a node ${formatSeconds(n.waitingS)}` : 'not placed';
  const parts = [`node ${n.hostname ?? '?'} (${n.nodeId.slice(0, 12)})`];
  parts.push(n.gpuIds.length > 0 ? `GPU ${n.gpuIds.join(',')}` : 'no GPU');
  if (n.acceleratorType) parts.push(n.acceleratorType);
  if (n.queueWaitS) parts.push(`waited ${formatSeconds(n.queueWaitS)}`);
  return parts.join(' · ');
}

/** A matrix (or farm run): one row over its cells, with how many are done. */
export function describeMatrix(m: BuildTreePayload): ElementView {
  const done = m.cells.filter((c) => c.status !== 'running' && BUILD_STATUSES.includes(c.status)).length;
  const status = m.status === 'running' ? (m.phaseText === 'stopping' ? `stopping (${m.cancelSource ?? '?'})` : 'building')
    : m.outcomeMessage ?? STATUS_TEXT[m.status];
  const lines = [`${m.engine}: ${status}`, `${done}/${m.cells.length} cells done`, `elapsed ${formatSeconds(m.elapsedS)}`];
  if (m.evidencePath) lines.push(`evidence: ${m.evidencePath}`);
  lines.push(`matrix ${m.buildId}`);
  return {
    label: m.engine,
    description: `${done}/${m.cells.length} cells · ${status} · ${formatSeconds(m.elapsedS)}`,
    tooltip: lines.join('\n'),
    icon: m.status === 'running' ? 'running' : outcomeIcon(m.outcomeKind),
    contextValue: m.status === 'running' ? 'trtls.build.running' : m.evidencePath ? 'trtls.build.finished' : 'trtls.build.done',
    collapsible: m.cells.length > 0,
    openEvidence: m.status !== 'running' && m.evidencePath !== null,
  };
}

/** A cell: its name, where it runs (node, GPU, queue wait) and its status; its phases are its children. */
export function describeCell(c: BuildTreePayload): ElementView {
  const base = describeBuild(c);
  const where = describeNode(c.node);
  const waiting = c.status === 'running' && c.node !== null && c.node.nodeId === null;
  const status = waiting ? where : `${base.description} · ${where}`;
  const labels = c.node ? Object.entries(c.node.labels).filter(([k]) => k !== 'ray.io/node-id') : [];
  return {
    ...base,
    label: c.cell ?? c.engine,
    description: status,
    tooltip: [base.tooltip, `where: ${where}`, ...(labels.length ? [`labels: ${labels.map(([k, v]) => `${k}=${v}`).join(', ')}`] : [])].join('\n'),
    icon: waiting ? 'pending' : base.icon,
  };
}

/** A finished build's icon from the server's outcomeKind; none (a build the client marked lost) is a warning. */
function outcomeIcon(kind: OutcomeKind | null): IconKind {
  switch (kind) {
    case 'ok': return 'ok';
    case 'cancelled': return 'cancelled';
    case 'failed': return 'error';
    case 'refused': return 'warning';
    case null: return 'warning';
  }
}

/** The server's step is TensorRT's 0-based index of the last completed step: show it 1-based. */
export function stepsDone(p: PhasePayload): number {
  if (p.step !== null) return Math.min(p.step + 1, Math.max(p.numSteps, p.step + 1));
  return p.status === 'done' ? p.numSteps : 0;
}

export function describePhase(p: PhasePayload, hasChildren: boolean): ElementView {
  const parts: string[] = [];
  if (p.numSteps > 0) {
    parts.push(`${stepsDone(p)}/${p.numSteps}`);
  }
  parts.push(formatSeconds(p.elapsedS));
  if (p.baselineS !== null) {
    parts.push(`usual ${formatSeconds(p.baselineS)}`);
  }
  const stalled = p.stalled;
  if (p.quietS !== null) {
    parts.push(`quiet for ${formatSeconds(p.quietS)}`);
  }
  if (p.status === 'cancelled' || p.status === 'failed') {
    parts.push(p.status);
  }
  const icon: IconKind = stalled ? 'warning'
    : p.status === 'running' ? 'running'
      : p.status === 'done' ? 'ok'
        : p.status === 'cancelled' ? 'cancelled'
          : 'error';
  const tooltip = [
    `${p.name} (${p.status})`,
    ...(stalled ? [`⚠ no progress for ${formatSeconds(p.quietS)}${p.baselineS !== null ? `; this phase usually takes ${formatSeconds(p.baselineS)}` : ''}`] : []),
    `phase ${p.id}`,
  ].join('\n');
  return {
    label: p.name,
    description: parts.join(' · '),
    tooltip,
    icon,
    contextValue: stalled ? 'trtls.phase.quiet' : 'trtls.phase',
    collapsible: hasChildren,
    openEvidence: false,
  };
}

/** Short status-bar text for the running builds, or undefined when none runs. */
export function statusBarText(running: BuildTreePayload[]): string | undefined {
  if (running.length === 0) {
    return undefined;
  }
  if (running.length === 1) {
    const b = running[0]!;
    return `$(sync~spin) TensorRT: building ${b.engine} · ${formatSeconds(b.elapsedS)}`;
  }
  return `$(sync~spin) TensorRT: ${running.length} builds (${running.map((b) => b.engine).join(', ')})`;
}
