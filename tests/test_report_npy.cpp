// The .npy writer: header (v1.0, little endian, 64-byte aligned), shapes, and values per dtype.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/rng.h"
#include "util/npy.h"

namespace flashlab {

TEST(Npy, HeaderIsNumpyV1) {
  const HostTensor x = random_normal(3, 1, 2 * 3 * 5 * 4, DType::f32);
  const std::string b = npy_bytes(x, {2, 3, 5, 4}, DType::f32);
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(b[6], 1);
  EXPECT_EQ(b[7], 0);
  const size_t len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + len) % 64, 0u);
  const std::string header = b.substr(10, len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  EXPECT_NE(header.find("'shape': (2, 3, 5, 4)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + len + x.size() * 4);
  EXPECT_EQ(static_cast<int64_t>(b.size()), npy_file_bytes(x.size(), {2, 3, 5, 4}, DType::f32));
}

TEST(Npy, ValuesRoundTripPerDtype) {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
    const HostTensor x = random_normal(11, 2, 1 * 2 * 7 * 3, t);
    const NpyArray a = parse_npy(npy_bytes(x, {1, 2, 7, 3}, t));
    EXPECT_EQ(a.descr, t == DType::f64 ? "<f8" : t == DType::f16 ? "<f2" : "<f4") << to_string(t);
    EXPECT_FALSE(a.fortran_order);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2, 7, 3}));
    ASSERT_EQ(a.values.size(), x.size());
    // The values are already representable in the dtype, so they come back exactly.
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(a.values[i], x[i]) << to_string(t) << " " << i;
  }
}

TEST(Npy, OneDimensionalShapeHasTrailingComma) {
  const std::string b = npy_bytes({1.0, -2.5, 3.25}, {3}, DType::f64);
  EXPECT_NE(b.find("'shape': (3,)"), std::string::npos);
  const NpyArray a = parse_npy(b);
  EXPECT_EQ(a.shape, std::vector<int64_t>{3});
  EXPECT_EQ(a.values, (std::vector<double>{1.0, -2.5, 3.25}));
}

TEST(Npy, LittleEndianBytes) {
  const std::string b = npy_bytes({1.0}, {1}, DType::f16);
  // fp16 1.0 is 0x3c00, stored low byte first.
  EXPECT_EQ(static_cast<unsigned char>(b[b.size() - 2]), 0x00);
  EXPECT_EQ(static_cast<unsigned char>(b[b.size() - 1]), 0x3c);
}

}  // namespace flashlab
