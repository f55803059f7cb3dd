// Resolve: spec §1, spec §1.2, extraction-spec §1.2.2 (an item), spec §1-2, spec §1.2's.
// Unresolved: spec §1.3 here.
// Unresolved: extraction-spec.md §1.2–1.5 (the range's end).
// Unresolved: spec §2, §1.2.3 (the chain's second).
// Not the spec's: FITS 4.0 §9.9, RFC 1952 §2.3, (§7).
