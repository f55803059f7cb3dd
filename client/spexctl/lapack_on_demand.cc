#include "client/spexctl/lapack_on_demand.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cpu/blas_core_type.h"
// The entry points defined below; including their declarations makes the compiler check
// that each definition has the signature the CPU backend calls.
#include "core/cpu/lapack_abi.h"

namespace spexd::client {
namespace {

struct Routines {
  decltype(&dpotrf_) dpotrf = nullptr;
  decltype(&dpotrs_) dpotrs = nullptr;
  decltype(&dpbtrf_) dpbtrf = nullptr;
  decltype(&dpbtrs_) dpbtrs = nullptr;
  decltype(&dsyevd_) dsyevd = nullptr;
  decltype(&dsymm_) dsymm = nullptr;
  decltype(&dtrsm_) dtrsm = nullptr;
  decltype(&dtrmm_) dtrmm = nullptr;
  decltype(&dsyrk_) dsyrk = nullptr;
  decltype(&dgemm_) dgemm = nullptr;
};

struct Loaded {
  Routines routines;
  absl::Status status;
};

template <typename Fn>
void Resolve(void* library, const char* name, Fn* slot, std::string* missing) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) absl::StrAppend(missing, " ", name);
  *slot = reinterpret_cast<Fn>(symbol);
}

absl::Status Open(Routines* r) {
  // BLAS first: the reference liblapack.so.3 needs libblas.so.3. RTLD_GLOBAL as a linked
  // library would be, for core::UseSingleThreadedBlas's lookup of OpenBLAS's setter.
  core::PresetOpenBlasCoreType();  // OpenBLAS reads it as it loads (blas_core_type.h)
  void* blas = dlopen("libblas.so.3", RTLD_NOW | RTLD_GLOBAL);
  if (blas == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("a local extraction needs BLAS (libblas.so.3): ", dlerror()));
  }
  void* lapack = dlopen("liblapack.so.3", RTLD_NOW | RTLD_GLOBAL);
  if (lapack == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("a local extraction needs LAPACK (liblapack.so.3): ", dlerror()));
  }
  std::string missing;
  Resolve(lapack, "dpotrf_", &r->dpotrf, &missing);
  Resolve(lapack, "dpotrs_", &r->dpotrs, &missing);
  Resolve(lapack, "dpbtrf_", &r->dpbtrf, &missing);
  Resolve(lapack, "dpbtrs_", &r->dpbtrs, &missing);
  Resolve(lapack, "dsyevd_", &r->dsyevd, &missing);
  Resolve(blas, "dsymm_", &r->dsymm, &missing);
  Resolve(blas, "dtrsm_", &r->dtrsm, &missing);
  Resolve(blas, "dtrmm_", &r->dtrmm, &missing);
  Resolve(blas, "dsyrk_", &r->dsyrk, &missing);
  Resolve(blas, "dgemm_", &r->dgemm, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("liblapack.so.3/libblas.so.3 lack routines the CPU backend calls:", missing));
  }
  return absl::OkStatus();
}

const Loaded& Load() {
  // Never destroyed: the routines may be called until the process exits.
  static const Loaded* const loaded = [] {
    auto* l = new Loaded;
    l->status = Open(&l->routines);
    return l;
  }();
  return *loaded;
}

// The entry points' way in. LoadLapackOnDemand() has succeeded before any backend exists
// (RunLocalExtract checks it first), so this fails only if a new caller skips that check:
// the routines return nothing that could carry an error.
const Routines& Get() {
  const Loaded& l = Load();
  if (!l.status.ok()) {
    std::fprintf(stderr, "spexctl: %s\n", l.status.ToString().c_str());
    std::abort();
  }
  return l.routines;
}

}  // namespace

absl::Status LoadLapackOnDemand() { return Load().status; }

}  // namespace spexd::client

// The Fortran entry points (hidden: client/CMakeLists.txt compiles this file with
// -fvisibility=hidden, so the libraries opened above never bind to them).
using spexd::client::Get;
extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info,
             std::size_t l1) {
  Get().dpotrf(uplo, n, a, lda, info, l1);
}
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, std::size_t l1) {
  Get().dpotrs(uplo, n, nrhs, a, lda, b, ldb, info, l1);
}
void dpbtrf_(const char* uplo, const int* n, const int* kd, double* ab, const int* ldab, int* info,
             std::size_t l1) {
  Get().dpbtrf(uplo, n, kd, ab, ldab, info, l1);
}
void dpbtrs_(const char* uplo, const int* n, const int* kd, const int* nrhs, const double* ab,
             const int* ldab, double* b, const int* ldb, int* info, std::size_t l1) {
  Get().dpbtrs(uplo, n, kd, nrhs, ab, ldab, b, ldb, info, l1);
}
void dsymm_(const char* side, const char* uplo, const int* m, const int* n, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta,
            double* c, const int* ldc, std::size_t l1, std::size_t l2) {
  Get().dsymm(side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);
}
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            double* b, const int* ldb, std::size_t l1, std::size_t l2, std::size_t l3,
            std::size_t l4) {
  Get().dtrsm(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4);
}
void dtrmm_(const char* side, const char* uplo, const char* transa, const char* diag,
            const int* m, const int* n, const double* alpha, const double* a, const int* lda,
            double* b, const int* ldb, std::size_t l1, std::size_t l2, std::size_t l3,
            std::size_t l4) {
  Get().dtrmm(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb, l1, l2, l3, l4);
}
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc,
            std::size_t l1, std::size_t l2) {
  Get().dsyrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc, l1, l2);
}
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t l1, std::size_t l2) {
  Get().dgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, l1, l2);
}
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda,
             double* w, double* work, const int* lwork, int* iwork, const int* liwork, int* info,
             std::size_t l1, std::size_t l2) {
  Get().dsyevd(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info, l1, l2);
}
}  // extern "C"
