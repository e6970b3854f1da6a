// Model of the "TensorRT Builds" tree, fed by the server's `trtls/buildTree` notification.
// Pure TypeScript (no vscode import) so it is unit-tested without VS Code. It renders what the server sent: the
// shapes are the generated protocol types (trtls.core.wire), and every word — a phase's detail, a build's or a
// matrix's description, where a cell runs, the finished-cell count, the folded rows — is computed once in Python
// (trtls.core.display) and shown here as it comes. Nothing here formats a number or re-derives a rule.
// The server's closed sets of words (outcomes, outcome kinds, phase statuses) are the generated vocabularies: a word is
// trusted when it is one of them (isWord), and each table keyed by one is a Record over its type, so a word added in
// trtls.core.vocabulary reaches here by regeneration and fails the type check until it has its icon.
import {
  BUILD_OUTCOMES, BUILD_TREE_NOTIFICATION, BuildOutcome, BuildTree, CellRow, isWord, MatrixTree, NodeView, OUTCOME_KINDS,
  OutcomeKind, PHASE_STATUSES, PhaseRow, PhaseStatus,
} from './generated/protocol';

export { BUILD_TREE_NOTIFICATION };
export type { CellRow, OutcomeKind, PhaseRow };

/** `lost` is the client's own: the build was running when the server process died (never sent by the server). */
export type BuildStatus = 'running' | BuildOutcome | 'lost';

/** A build, a cell or a matrix as the model holds it: the server's fields, and `status`, the tree's own state. */
export interface HeldBuild {
  buildId: string;
  engine: string;
  kind: 'build' | 'matrix';
  uri: string;
  status: BuildStatus;
  parentId: string | null;
  cell: string | null;
  cancelSource: string | null;
  outcomeKind: OutcomeKind | null;
  outcomeMessage: string | null;
  rebuiltBecause: string | null;
  /** The server's row text (`building · 4.1 s`, `3/4 cells done · building · 12 s`). */
  description: string;
  where: string;
  /** A farm cell's node (null: local, or not a cell). */
  node: NodeView | null;
  elapsedText: string;
  /** While it runs: `~40 s left, 25–60 s` or `no estimate`, the server's words (core.display.time_left_text). */
  timeLeft: string | null;
  cellsText: string | null;
  evidencePath: string | null;
  phases: PhaseRow[];
  phasesDelta: boolean;
  cells: CellRow[];
}

export function parseOutcomeKind(v: unknown): OutcomeKind | null {
  return isWord(OUTCOME_KINDS, v) ? v : null;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function str(v: unknown, dflt: string): string {
  return typeof v === 'string' ? v : dflt;
}
function strOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** A phase the server sent, with its words; a phase without an id is dropped (the tree could not place it). */
function parsePhase(p: unknown): PhaseRow | undefined {
  if (!isObj(p) || typeof p.id !== 'string') return undefined;
  const row = p as unknown as PhaseRow;
  return {
    ...row,
    parentId: strOrNull(p.parentId),
    name: str(p.name, p.id),
    status: isWord(PHASE_STATUSES, p.status) ? p.status : 'running',
    stalled: p.stalled === true,
    foldedInto: strOrNull(p.foldedInto),
    detail: str(p.detail, ''),
    groupLabel: strOrNull(p.groupLabel),
    groupDetail: strOrNull(p.groupDetail),
  };
}

function parseCells(v: unknown): CellRow[] {
  if (!Array.isArray(v)) return [];
  return v.filter((c): c is CellRow => isObj(c) && typeof c.cell === 'string')
    .map((c) => ({ ...c, buildId: strOrNull(c.buildId), status: str(c.status, 'running'), description: str(c.description, c.status) }));
}

/** Validates one notification (`BuildTree` or `MatrixTree`); returns undefined if it is unusable. */
export function parseBuildTree(raw: unknown): HeldBuild | undefined {
  if (!isObj(raw) || typeof raw.buildId !== 'string' || raw.buildId === '') {
    return undefined;
  }
  const sent = raw as Partial<BuildTree> & Partial<MatrixTree>;
  // a worker's outcomes, and the builds that started none: `reused` from the engine store, `rolled_back` (docs/store.md)
  const outcome: BuildStatus = isWord(BUILD_OUTCOMES, raw.outcome) ? raw.outcome : 'failed';
  return {
    buildId: raw.buildId,
    engine: str(raw.engine, '?'),
    kind: raw.kind === 'matrix' ? 'matrix' : 'build',
    uri: str(raw.uri, ''),
    // The server says whether it still runs; an ended build without a known outcome is not shown as a success.
    status: raw.running === false ? outcome : 'running',
    parentId: strOrNull(raw.parentId),
    cell: strOrNull(raw.cell),
    cancelSource: strOrNull(raw.cancelSource),
    outcomeKind: parseOutcomeKind(raw.outcomeKind),
    outcomeMessage: strOrNull(raw.outcomeMessage),
    rebuiltBecause: strOrNull(raw.rebuiltBecause),
    description: str(sent.description, str(raw.status, '')),
    where: str(sent.where, ''),
    node: isObj(raw.node) ? raw.node : null,
    elapsedText: str(sent.elapsedText, ''),
    timeLeft: strOrNull(sent.timeLeft),
    cellsText: strOrNull(sent.cellsText),
    evidencePath: strOrNull(raw.evidencePath),
    phases: Array.isArray(raw.phases) ? raw.phases.map(parsePhase).filter((p): p is PhaseRow => p !== undefined) : [],
    phasesDelta: raw.phasesDelta === true,
    cells: parseCells(raw.cells),
  };
}

/** A delta's phases merged into the ones held: replaced by id in place, new ones added after, in the server's order
 * (its start order, which is the tree's row order: the client never reorders). */
export function mergePhases(held: PhaseRow[], delta: PhaseRow[]): PhaseRow[] {
  const byId = new Map(held.map((p) => [p.id, p]));
  for (const p of delta) byId.set(p.id, p);
  return [...byId.values()];
}

export type TreeElement =
  | { kind: 'build'; buildId: string }
  | { kind: 'pendingCell'; buildId: string; cell: string; description: string; message: string | null }
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

const LOST_TEXT = 'lost (server stopped)';

function placeholder(buildId: string, engine: string, uri: string, over: Partial<HeldBuild> = {}): HeldBuild {
  return {
    buildId, engine, kind: 'build', uri, status: 'running', parentId: null, cell: null, cancelSource: null, outcomeKind: null,
    outcomeMessage: null, rebuiltBecause: null, description: 'starting', where: '', node: null, elapsedText: '', cellsText: null, evidencePath: null, phases: [],
    phasesDelta: false, cells: [], timeLeft: null, ...over,
  };
}

export class BuildTreeModel {
  /** Insertion order = start order. */
  private readonly builds = new Map<string, HeldBuild>();
  private readonly maxBuilds: number;

  constructor(maxBuilds = 20) {
    this.maxBuilds = maxBuilds;
  }

  /** Applies a notification; returns the build it changed, or undefined if it was rejected. */
  update(raw: unknown): HeldBuild | undefined {
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
      this.builds.set(buildId, placeholder(buildId, engine, uri));
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
  markLost(message: string): HeldBuild[] {
    const lost: HeldBuild[] = [];
    for (const b of this.builds.values()) {
      if (b.status !== 'running') continue;
      b.status = 'lost';
      b.outcomeMessage = message;
      b.description = LOST_TEXT;
      b.phases = b.phases.map((p) => (p.status === 'running'
        ? { ...p, status: 'failed', quietForS: null, quietS: null, stalled: false, detail: 'failed' } : p));
      lost.push(b);
    }
    return lost;
  }

  get(buildId: string): HeldBuild | undefined {
    return this.builds.get(buildId);
  }

  /** Newest first: builds and matrices, not the cells (they are under their matrix). */
  all(): HeldBuild[] {
    return [...this.builds.values()].filter((b) => b.parentId === null).reverse();
  }

  running(): HeldBuild[] {
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
          this.builds.set(row.buildId, placeholder(row.buildId, m.engine, m.uri, {
            parentId: matrixId, cell: row.cell, description: row.description, outcomeMessage: row.message ?? null,
            node: row.node ?? null,
          }));
        }
        out.push({ kind: 'build', buildId: row.buildId });
      } else {
        out.push({ kind: 'pendingCell', buildId: matrixId, cell: row.cell, description: row.description, message: row.message ?? null });
      }
    }
    for (const b of this.builds.values()) {
      if (b.parentId === matrixId && !listed.has(b.buildId)) out.push({ kind: 'build', buildId: b.buildId });
    }
    return out;
  }

  phase(buildId: string, phaseId: string): PhaseRow | undefined {
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
    // The server sends phases in start order, the row order of every face (core/phase_tree.rows_of).
    const kids = b.phases.filter((p) => p.parentId === parentId);
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
        label: el.cell, description: el.description, tooltip: el.message ?? el.description,  // the server's words
        icon: 'pending', contextValue: 'trtls.cell.pending', collapsible: false, openEvidence: false,
      };
    }
    if (el.kind === 'build') {
      return b.kind === 'matrix' ? describeMatrix(b) : b.parentId !== null ? describeCell(b) : describeBuild(b);
    }
    const p = b.phases.find((x) => x.id === el.phaseId);
    if (p === undefined) {
      return undefined;
    }
    if (el.foldedIds !== undefined) {
      return {
        label: p.groupLabel ?? p.name,
        description: p.groupDetail ?? '',
        tooltip: `${el.foldedIds.length} phases named "${p.name}", all done (phases ${el.foldedIds.join(', ')})`,
        icon: 'ok',
        contextValue: 'trtls.phase',
        collapsible: false,
        openEvidence: false,
      };
    }
    return describePhase(p, b.phases.some((x) => x.parentId === p.id));
  }
}

function rowContext(b: HeldBuild): string {
  return b.status === 'running' ? 'trtls.build.running' : b.evidencePath ? 'trtls.build.finished' : 'trtls.build.done';
}

function rowIcon(b: HeldBuild): IconKind {
  return b.status === 'running' ? 'running' : outcomeIcon(b.outcomeKind);
}

export function describeBuild(b: HeldBuild): ElementView {
  const lines = [`${b.engine}: ${runningText(b)}`];
  if (b.outcomeMessage) lines.push(b.outcomeMessage);
  if (b.rebuiltBecause) lines.push(b.rebuiltBecause);  // the server's words: why it did not reuse an engine
  if (b.evidencePath) lines.push(`evidence: ${b.evidencePath}`);
  lines.push(`build ${b.buildId}`);
  return {
    // a matrix cell the store served when no matrix run started has no parent row: its name says which cell
    label: b.parentId === null && b.cell !== null ? `${b.engine}/${b.cell}` : b.engine,
    description: runningText(b),
    tooltip: lines.join('\n'),
    icon: rowIcon(b),
    contextValue: rowContext(b),
    collapsible: b.phases.length > 0,
    openEvidence: b.status !== 'running' && b.evidencePath !== null,
  };
}

/** The row's text: the server's description, and while it runs the server's time left (`· ~40 s left, 25–60 s`). */
function runningText(b: HeldBuild): string {
  return b.status === 'running' && b.timeLeft ? `${b.description} · ${b.timeLeft}` : b.description;
}

/** A matrix (or farm run): one row over its cells; the count and the status are the server's words. */
export function describeMatrix(m: HeldBuild): ElementView {
  const lines = [`${m.engine}: ${m.description}`];
  if (m.evidencePath) lines.push(`evidence: ${m.evidencePath}`);
  lines.push(`matrix ${m.buildId}`);
  return { ...describeBuild(m), tooltip: lines.join('\n'), collapsible: m.cells.length > 0 };
}

/** A cell: its name, where it runs and its status (one server text); its phases are its children. */
export function describeCell(c: HeldBuild): ElementView {
  const base = describeBuild(c);
  const waiting = c.status === 'running' && c.node !== null && (c.node.nodeId ?? null) === null;
  return { ...base, label: c.cell ?? c.engine, tooltip: [base.tooltip, `where: ${c.where}`].join('\n'), icon: waiting ? 'pending' : base.icon };
}

const OUTCOME_ICON: Record<OutcomeKind, IconKind> = { ok: 'ok', cancelled: 'cancelled', failed: 'error', refused: 'warning' };
const PHASE_ICON: Record<PhaseStatus, IconKind> = { running: 'running', done: 'ok', cancelled: 'cancelled', failed: 'error' };

/** A finished build's icon from the server's outcomeKind; none (a build the client marked lost) is a warning. */
function outcomeIcon(kind: OutcomeKind | null): IconKind {
  return kind === null ? 'warning' : OUTCOME_ICON[kind];
}

export function describePhase(p: PhaseRow, hasChildren: boolean): ElementView {
  const icon: IconKind = p.stalled ? 'warning' : PHASE_ICON[p.status];
  const tooltip = [
    `${p.name} (${p.status})`,
    ...(p.stalled ? ['⚠ stalled: silent longer than this phase usually takes'] : []),
    p.detail,
    `phase ${p.id}`,
  ].join('\n');
  return {
    label: p.name,
    description: p.detail,
    tooltip,
    icon,
    contextValue: p.stalled ? 'trtls.phase.quiet' : 'trtls.phase',
    collapsible: hasChildren,
    openEvidence: false,
  };
}

/** Short status-bar text for the running builds, or undefined when none runs. */
export function statusBarText(running: HeldBuild[]): string | undefined {
  if (running.length === 0) {
    return undefined;
  }
  if (running.length === 1) {
    const b = running[0]!;
    return `$(sync~spin) TensorRT: ${b.engine} · ${runningText(b)}`;
  }
  return `$(sync~spin) TensorRT: ${running.length} builds (${running.map((b) => b.engine).join(', ')})`;
}
