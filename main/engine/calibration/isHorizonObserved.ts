/**
 * Whether a sample's read horizon is known: its text went on at least max(minWatched, 2 x horizon) tokens after it, so a
 * later read would have been seen (scripts/retention/train.py's `horizon_loss`: `watched >= clamp(2 * horizon, min=16)`).
 */
export function isHorizonObserved(followers: number, horizon: number, minWatched: number = 16): boolean {
    return followers >= Math.max(minWatched, 2 * horizon);
}
