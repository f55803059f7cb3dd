// Seeded offences for scripts/check_job_requests.py: lines 2, 3 and 5 name request types.
void Read(const v1::ExtractHeader& header);
bool Realtime(int p) { return p == v1::REALTIME || v1::Priority_IsValid(p); }
void Reply(v1::ExtractSummary* summary);  // a response: allowed
const v1::Region* RegionOf();
