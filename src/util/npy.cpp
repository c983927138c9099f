#include "util/npy.h"

#include <bit>
#include <cstring>
#include <stdexcept>

#include "core/dtype.h"

namespace flashlab {

static_assert(std::endian::native == std::endian::little,
              "npy writer assumes a little-endian host");

namespace {

int elem_bytes(DType t) {
  return t == DType::f64 ? 8 : t == DType::f16 ? 2 : 4;
}

// "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 64), }" padded with spaces and a
// final newline so the data starts on a 64-byte boundary.
std::string header(const std::vector<int64_t>& shape, const std::string& descr) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  const size_t prefix = 10;  // magic (6) + version (2) + header length (2)
  size_t total = prefix + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

}  // namespace

std::string npy_descr(DType t) {
  switch (t) {
    case DType::f64:
      return "<f8";
    case DType::f16:
      return "<f2";
    case DType::f32:
    case DType::bf16:
    case DType::fp8:  // its bf16 values, which NumPy has no type for
      return "<f4";
  }
  return "<f8";
}

int64_t npy_file_bytes(int64_t elems, const std::vector<int64_t>& shape, DType t) {
  return static_cast<int64_t>(header(shape, npy_descr(t)).size()) + elems * elem_bytes(t);
}

std::string npy_bytes(const HostTensor& values, const std::vector<int64_t>& shape, DType t) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (n != static_cast<int64_t>(values.size()))
    throw std::logic_error("npy_bytes: shape does not match the number of values");
  std::string out = header(shape, npy_descr(t));
  const size_t start = out.size();
  out.resize(start + values.size() * elem_bytes(t));
  char* p = out.data() + start;
  for (double v : values) {
    if (t == DType::f64) {
      std::memcpy(p, &v, 8);
      p += 8;
    } else if (t == DType::f16) {
      const uint16_t h = float_to_half_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      p += 2;
    } else {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      p += 4;
    }
  }
  return out;
}

std::string npy_int32_bytes(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  int64_t n = 1;
  for (const int64_t e : shape) n *= e;
  if (n != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("npy_int32_bytes: the shape does not hold the values");
  std::string out = header(shape, "<i4");
  const size_t start = out.size();
  out.resize(start + 4 * values.size());
  if (!values.empty()) std::memcpy(out.data() + start, values.data(), 4 * values.size());
  return out;
}

NpyArray parse_npy(const std::string& bytes) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error("not a .npy file");
  if (bytes[6] != 1 || bytes[7] != 0) throw std::runtime_error("not a version 1.0 .npy file");
  const size_t len = static_cast<unsigned char>(bytes[8]) |
                     (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < 10 + len) throw std::runtime_error("truncated .npy header");
  const std::string dict = bytes.substr(10, len);
  NpyArray a;
  const auto field = [&](const std::string& key) {
    const size_t k = dict.find("'" + key + "':");
    if (k == std::string::npos) throw std::runtime_error(".npy header lacks " + key);
    return k + key.size() + 3;
  };
  size_t pos = dict.find('\'', field("descr"));
  a.descr = dict.substr(pos + 1, dict.find('\'', pos + 1) - pos - 1);
  a.fortran_order =
      dict.compare(dict.find_first_not_of(' ', field("fortran_order")), 4, "True") == 0;
  pos = dict.find('(', field("shape"));
  const size_t end = dict.find(')', pos);
  std::string dims = dict.substr(pos + 1, end - pos - 1);
  int64_t n = 1;
  size_t i = 0;
  while (i < dims.size()) {
    const size_t j = dims.find(',', i);
    const std::string tok = dims.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (tok.find_first_not_of(' ') != std::string::npos) {
      a.shape.push_back(std::stoll(tok));
      n *= a.shape.back();
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  const bool i4 = a.descr == "<i4";
  const int eb = a.descr == "<f8" ? 8 : a.descr == "<f4" || i4 ? 4 : a.descr == "<f2" ? 2 : 0;
  if (eb == 0) throw std::runtime_error("unsupported .npy dtype " + a.descr);
  const size_t data = 10 + len;
  if (bytes.size() != data + static_cast<size_t>(n) * eb)
    throw std::runtime_error(".npy data size does not match its shape");
  a.values.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const char* p = bytes.data() + data + k * eb;
    if (eb == 8) {
      std::memcpy(&a.values[k], p, 8);
    } else if (i4) {
      int32_t x;
      std::memcpy(&x, p, 4);
      a.values[k] = x;
    } else if (eb == 4) {
      float f;
      std::memcpy(&f, p, 4);
      a.values[k] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, p, 2);
      a.values[k] = half_bits_to_float(h);
    }
  }
  return a;
}

}  // namespace flashlab
