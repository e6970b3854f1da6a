// Progress state for one server-created work-done token, shown as a toast (no vscode import).
import { OutcomeKind, parseOutcomeKind } from './buildTree';

export interface ProgressBegin { kind: 'begin'; title: string; cancellable?: boolean; message?: string; percentage?: number }
export interface ProgressReport { kind: 'report'; cancellable?: boolean; message?: string; percentage?: number }
/** The server's end carries its outcome as data (trtls.core.outcome): never classified here from the message. */
export interface ProgressEnd { kind: 'end'; message?: string; outcome?: string; outcomeKind?: string }
export type ProgressValue = ProgressBegin | ProgressReport | ProgressEnd;

/** Toast message: "42% · Building engine › Timing tactics 2/3 · 4.1 s". */
export function formatProgressMessage(message: string | undefined, percentage: number | undefined): string {
  const pct = percentage === undefined || !Number.isFinite(percentage) ? undefined : Math.max(0, Math.min(100, Math.round(percentage)));
  const msg = (message ?? '').trim();
  if (pct === undefined) {
    return msg;
  }
  return msg === '' ? `${pct}%` : `${pct}% · ${msg}`;
}

/** How to tell the user a progress ended: the server's outcomeKind; `other` when it sent none (another server's
 *  progress, or an older trtls). */
export type EndKind = OutcomeKind | 'other';
export function endKind(v: ProgressEnd): EndKind {
  return parseOutcomeKind(v.outcomeKind) ?? 'other';
}

/**
 * Tracks one token: the last message and percentage (message persists when a report leaves it unset),
 * and turns absolute percentages into the increments `vscode.Progress.report` wants, never going back.
 */
export class ProgressTracker {
  title = '';
  message: string | undefined;
  percentage: number | undefined;
  cancellable = false;
  ended = false;
  endMessage: string | undefined;
  endKind: EndKind = 'other';
  private shown = 0;

  apply(v: ProgressValue): { message: string; increment: number | undefined } | undefined {
    if (this.ended) {
      return undefined;
    }
    if (v.kind === 'end') {
      this.ended = true;
      this.endMessage = v.message;
      this.endKind = endKind(v);
      return undefined;
    }
    if (v.kind === 'begin') {
      this.title = v.title;
      this.cancellable = v.cancellable ?? false;
    } else if (v.cancellable !== undefined) {
      this.cancellable = v.cancellable;
    }
    if (v.message !== undefined) this.message = v.message;
    if (v.percentage !== undefined && Number.isFinite(v.percentage)) this.percentage = v.percentage;
    let increment: number | undefined;
    if (this.percentage !== undefined) {
      const target = Math.max(0, Math.min(100, this.percentage));
      if (target > this.shown) {
        increment = target - this.shown;
        this.shown = target;
      }
    }
    return { message: formatProgressMessage(this.message, this.percentage), increment };
  }
}
