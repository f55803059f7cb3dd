// The one conversion of the request parameters (proto/convert/extraction_params.h), which
// the server and the C++ clients share. The proto side is driven by its descriptor: every
// field of v1::ExtractionParams is set to a non-default value and must survive
// proto -> core -> proto, so a field added to the proto fails here until the conversion
// carries it both ways. The core side counts core::ExtractionParams' fields for the same
// reason.
#include <string>

#include "core/base/field_count.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/convert/extraction_params.h"

namespace spexd {
namespace {

using google::protobuf::FieldDescriptor;

// The fields the round trip below sets and compares; want_model travels in the header,
// next to the params (ExtractHeader.want_model).
static_assert(core::FieldCount<core::ExtractionParams>() == 19,
              "core::ExtractionParams changed: handle the field in "
              "proto/convert/extraction_params.cc, client/python/spexd/request.py, "
              "spexctl's flags (client/spexctl/extract_flags.cc) and this test");

// Every field of `m` set to a value that is not its default (and valid for the
// conversion: enums take their last value, numbers distinct ones).
void SetEveryField(google::protobuf::Message* m) {
  const google::protobuf::Descriptor* d = m->GetDescriptor();
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    ASSERT_FALSE(f->is_repeated()) << f->name() << ": extend SetEveryField";
    const int k = f->number();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, 1000.0 + 0.25 * k); break;
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, 100 + k); break;
      case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, f, true); break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const google::protobuf::EnumDescriptor* e = f->enum_type();
        r->SetEnum(m, f, e->value(e->value_count() - 1));
        break;
      }
      default:
        FAIL() << f->name() << ": a field type SetEveryField does not know";
    }
  }
}

TEST(ExtractionParamsConvertTest, EveryProtoFieldSurvivesProtoToCoreToProto) {
  v1::ExtractionParams in;
  SetEveryField(&in);
  const google::protobuf::Descriptor* d = in.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->has_presence()) {
      EXPECT_TRUE(in.GetReflection()->HasField(in, f)) << f->name();
    }
  }
  absl::StatusOr<core::ExtractionParams> params = wire::ParamsFromProto(in, /*want_model=*/true);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_TRUE(params->want_model);
  const v1::ExtractionParams back = wire::ParamsToProto(*params);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(in, back)) << "lost or changed on the way: " << diff;
}

TEST(ExtractionParamsConvertTest, EveryCoreFieldSurvivesCoreToProtoToCore) {
  core::ExtractionParams p;
  p.has_wavelength = true;
  p.wmin = 3600.5;
  p.wmax = 5900.25;
  p.dw = 0.5;
  p.specmin = 25;
  p.nspec = 75;
  p.bundlesize = 20;
  p.nsubbundles = 4;
  p.nwavestep = 30;
  p.wavepad = 8;
  p.wavepad_frac = 0.3;
  p.pixpad_frac = 0.7;
  p.regularize = 0.01;
  p.psferr = 0.02;
  p.compat = core::Compat::kCpu;
  p.mask_policy = core::MaskPolicy::kAnyBit;
  p.want_model = true;
  p.barycentric_correction = true;
  p.scores = false;
  absl::StatusOr<core::ExtractionParams> q = wire::ParamsFromProto(wire::ParamsToProto(p), true);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->has_wavelength, p.has_wavelength);
  EXPECT_EQ(q->wmin, p.wmin);
  EXPECT_EQ(q->wmax, p.wmax);
  EXPECT_EQ(q->dw, p.dw);
  EXPECT_EQ(q->specmin, p.specmin);
  EXPECT_EQ(q->nspec, p.nspec);
  EXPECT_EQ(q->bundlesize, p.bundlesize);
  EXPECT_EQ(q->nsubbundles, p.nsubbundles);
  EXPECT_EQ(q->nwavestep, p.nwavestep);
  EXPECT_EQ(q->wavepad, p.wavepad);
  EXPECT_EQ(q->wavepad_frac, p.wavepad_frac);
  EXPECT_EQ(q->pixpad_frac, p.pixpad_frac);
  EXPECT_EQ(q->regularize, p.regularize);
  EXPECT_EQ(q->psferr, p.psferr);
  EXPECT_EQ(q->compat, p.compat);
  EXPECT_EQ(q->mask_policy, p.mask_policy);
  EXPECT_EQ(q->want_model, p.want_model);
  EXPECT_EQ(q->barycentric_correction, p.barycentric_correction);
  EXPECT_EQ(q->scores, p.scores);
  // Unset optionals stay unset: the PSF's grid and PSFERR apply.
  p.has_wavelength = false;
  p.psferr.reset();
  q = wire::ParamsFromProto(wire::ParamsToProto(p), false);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_FALSE(q->has_wavelength);
  EXPECT_FALSE(q->psferr.has_value());
}

TEST(ExtractionParamsConvertTest, UnsetFieldsTakeDesiExtractSpectraDefaults) {
  auto p = wire::ParamsFromProto(v1::ExtractionParams(), false);
  ASSERT_TRUE(p.ok());
  const core::ExtractionParams d;
  EXPECT_FALSE(p->has_wavelength);  // PSF domain, dw 0.8
  EXPECT_EQ(p->nspec, d.nspec);
  EXPECT_EQ(p->bundlesize, d.bundlesize);
  EXPECT_EQ(p->nsubbundles, d.nsubbundles);
  EXPECT_EQ(p->nwavestep, d.nwavestep);
  EXPECT_EQ(p->wavepad, d.wavepad);
  EXPECT_EQ(p->wavepad_frac, d.wavepad_frac);
  EXPECT_EQ(p->pixpad_frac, d.pixpad_frac);
  EXPECT_FALSE(p->psferr.has_value());
  EXPECT_EQ(p->compat, core::Compat::kGpu);
  EXPECT_EQ(p->mask_policy, core::MaskPolicy::kDesispec);
}

TEST(ExtractionParamsConvertTest, ExplicitValuesAndWavelengthRule) {
  v1::ExtractionParams in;
  in.set_wmin(5760);
  in.set_wmax(7620);
  in.set_dw(0.8);
  in.set_nspec(0);  // passed through: validated against the PSF later
  in.set_psferr(0.04);
  in.set_compat(v1::COMPAT_CPU);
  in.set_mask_policy(v1::MASK_POLICY_ANY_BIT);
  auto p = wire::ParamsFromProto(in, true);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->has_wavelength);
  EXPECT_EQ(p->wmax, 7620);
  EXPECT_EQ(p->nspec, 0);
  EXPECT_EQ(*p->psferr, 0.04);
  EXPECT_EQ(p->compat, core::Compat::kCpu);
  EXPECT_EQ(p->mask_policy, core::MaskPolicy::kAnyBit);
  EXPECT_TRUE(p->want_model);
  in.clear_dw();
  EXPECT_EQ(wire::ParamsFromProto(in, false).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spexd
