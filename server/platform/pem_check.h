// What gRPC would otherwise refuse only as "cannot listen": TLS files that are not PEM, a
// key that is not the certificate's. Checked at startup with OpenSSL, so that the message
// names the flag, the file and what is wrong with it.
#ifndef SPEXD_SERVER_PLATFORM_PEM_CHECK_H_
#define SPEXD_SERVER_PLATFORM_PEM_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace spexd::server {

// `cert_pem` (from --tls_cert `cert_file`) must hold a PEM certificate, `key_pem` (from
// --tls_key `key_file`) a PEM private key matching it. INVALID_ARGUMENT otherwise.
absl::Status CheckTlsPair(const std::string& cert_pem, const std::string& cert_file,
                          const std::string& key_pem, const std::string& key_file);
// `ca_pem` (from --tls_client_ca `ca_file`) must hold at least one PEM certificate.
absl::Status CheckTlsClientCa(const std::string& ca_pem, const std::string& ca_file);

}  // namespace spexd::server

#endif  // SPEXD_SERVER_PLATFORM_PEM_CHECK_H_
