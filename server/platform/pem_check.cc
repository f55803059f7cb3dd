#include "server/platform/pem_check.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace spexd::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& bytes) {
  return std::unique_ptr<BIO, BioFree>(
      BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
}

// OpenSSL's reason for the last failure (its error queue emptied, so that nothing stale
// reaches the next check or gRPC).
std::string OpenSslReason() {
  const unsigned long code = ERR_peek_last_error();
  std::string reason = code != 0 && ERR_reason_error_string(code) != nullptr
                           ? absl::StrCat(" (OpenSSL: ", ERR_reason_error_string(code), ")")
                           : std::string();
  ERR_clear_error();
  return reason;
}

std::unique_ptr<X509, X509Free> ReadCertificate(const std::string& pem) {
  auto bio = MemoryBio(pem);
  if (bio == nullptr) return nullptr;
  return std::unique_ptr<X509, X509Free>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace

absl::Status CheckTlsPair(const std::string& cert_pem, const std::string& cert_file,
                          const std::string& key_pem, const std::string& key_file) {
  ERR_clear_error();
  auto cert = ReadCertificate(cert_pem);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert ", cert_file, " holds no PEM certificate (a '-----BEGIN CERTIFICATE-----' "
        "block)", OpenSslReason()));
  }
  auto bio = MemoryBio(key_pem);
  // No passphrase callback: an encrypted key is refused rather than prompted for.
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      bio == nullptr ? nullptr
                     : PEM_read_bio_PrivateKey(bio.get(), nullptr,
                                               [](char*, int, int, void*) { return 0; }, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key ", key_file, " holds no unencrypted PEM private key (a '-----BEGIN ... "
        "PRIVATE KEY-----' block)", OpenSslReason()));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key ", key_file,
                                                   " is not the private key of --tls_cert ",
                                                   cert_file, OpenSslReason()));
  }
  return absl::OkStatus();
}

absl::Status CheckTlsClientCa(const std::string& ca_pem, const std::string& ca_file) {
  ERR_clear_error();
  if (ReadCertificate(ca_pem) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_client_ca ", ca_file, " holds no PEM certificate (a '-----BEGIN CERTIFICATE-----' "
        "block)", OpenSslReason()));
  }
  return absl::OkStatus();
}

}  // namespace spexd::server
