// Analyze text colours a token by the rank the model gave it, in GLTR's four buckets (the first that holds it).
export const RANK_BUCKETS = [
  { name: 'top-10', maxRank: 10, label: 'top 10' },
  { name: 'top-100', maxRank: 100, label: 'top 100' },
  { name: 'top-1000', maxRank: 1000, label: 'top 1000' },
  { name: 'beyond', maxRank: Infinity, label: 'beyond the top 1000' },
];

export function rankBucket(rank) {
  return RANK_BUCKETS.find((bucket) => rank <= bucket.maxRank);
}
