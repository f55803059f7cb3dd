// Seeded lines for the ctest wording_catches_seeded_lines (scripts/check_wording.sh):
// the lines marked FIND must each be reported, the others must pass.
// The parser refuses a NaN (issue 15 item 3).            FIND
// Measured in session 39 on the H100.                     FIND
// 0.0495 s (call 9) on one H100.                          FIND
// See issue #12 for the history.                          FIND
// Timed on the dev VM under load.                         FIND
// Slower in a slow machine start.                         FIND
// The reader keeps its buffer, as before.                 FIND
TEST(Parser, Issue21InputsAreRefused) {}  //               FIND
// A number split over two lines: as the issue
// 25 asked.                                               FIND
// Items 1, 7 and 12 of the list.                          FIND
// Seen in CI, stop 37.                                    FIND
// What must pass: a gRPC call ends in OnDone; the TLS session cache is per channel;
// issue a warning when an item of the list is empty; call the function again; stop the
// server; the session ticket keys rotate; step 3 of spec §2.10; the call watchdog cancels a call
// whose client stalled; calls from every thread; the issuer's certificate.
