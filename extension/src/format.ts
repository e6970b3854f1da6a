// Small formatting helpers shared by the tree, the toast and the status bar (no vscode import).

/** "0.4 s", "4.1 s", "59 s", "1 min 05 s", "2 h 03 min". */
export function formatSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s) || s < 0) {
    return '–';
  }
  if (s < 10) {
    return `${(Math.round(s * 10) / 10).toFixed(1)} s`;
  }
  if (s < 60) {
    return `${Math.round(s)} s`;
  }
  const total = Math.round(s);
  if (total < 3600) {
    const m = Math.floor(total / 60);
    const sec = total % 60;
    return `${m} min ${String(sec).padStart(2, '0')} s`;
  }
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  return `${h} h ${String(m).padStart(2, '0')} min`;
}
