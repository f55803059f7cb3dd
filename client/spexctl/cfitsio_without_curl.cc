// The six libcurl functions that CFITSIO's static archive calls, for a spexctl that links
// CFITSIO statically (SPEXD_STATIC_SPEXCTL, client/CMakeLists.txt).
//
// Why: Debian's CFITSIO is built with libcurl for its https:// and ftps:// file drivers, and
// libcurl-gnutls brings about 30 libraries (gnutls, nettle, krb5, ldap, ssh2, rtmp, ...)
// whose mapping and relocation were about a quarter of every spexctl start. spexctl never reaches
// those drivers: core/io opens and creates files with fits_open_diskfile/fits_create_diskfile and
// memory files, which take a name as a
// plain path, never as a URL. So the curl layer here refuses: CFITSIO's initialisation
// (curl_global_init) succeeds, and an https:// or ftps:// open, were one ever made, fails
// with CFITSIO's own error, as for a host it cannot reach.
//
// Declared with the C types of curl's ABI (CURLcode and CURLoption are enums, CURL is an
// opaque handle) rather than from <curl/curl.h>, which the build does not otherwise need.
extern "C" {

namespace {
constexpr int kCurlOk = 0;
constexpr int kCurlFailedInit = 2;  // CURLE_FAILED_INIT
}  // namespace

int curl_global_init(long /*flags*/) { return kCurlOk; }
void curl_global_cleanup(void) {}
// CFITSIO treats a null handle as "could not initialise curl" and fails the open.
void* curl_easy_init(void) { return nullptr; }
int curl_easy_setopt(void* /*handle*/, int /*option*/, ...) { return kCurlFailedInit; }
int curl_easy_perform(void* /*handle*/) { return kCurlFailedInit; }
void curl_easy_cleanup(void* /*handle*/) {}

}  // extern "C"
