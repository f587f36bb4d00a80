// References: permute, unpermute and SwiGLU.
#include <cmath>
#include <stdexcept>

#include "kernels/reference.hpp"

namespace epo::kernels::ref {

void permute(const uint16_t* x, int64_t num_in_rows, int hidden, const int* row_src,
             int64_t num_out_rows, uint16_t* out) {
  for (int64_t r = 0; r < num_out_rows; ++r) {
    int src = row_src[r];
    if (src >= num_in_rows) throw std::invalid_argument("row_src entry past num_in_rows");
    for (int h = 0; h < hidden; ++h)
      out[r * hidden + h] = src < 0 ? uint16_t{0} : x[static_cast<int64_t>(src) * hidden + h];
  }
}

void unpermute(const uint16_t* y, int64_t num_rows, int hidden, const int* permuted_row,
               const float* topk_weights, int num_tokens, int num_topk, uint16_t* out) {
  for (int t = 0; t < num_tokens; ++t) {
    for (int h = 0; h < hidden; ++h) {
      float acc = 0.f;
      for (int k = 0; k < num_topk; ++k) {
        int64_t i = static_cast<int64_t>(t) * num_topk + k;
        int row = permuted_row[i];
        if (row < 0) continue;
        if (row >= num_rows) throw std::invalid_argument("permuted_row entry past num_rows");
        float w = topk_weights ? topk_weights[i] : 1.f;
        // fma, as the kernel does, so both round identically.
        acc = std::fma(w, bf16_to_float(y[static_cast<int64_t>(row) * hidden + h]), acc);
      }
      out[static_cast<int64_t>(t) * hidden + h] = float_to_bf16(acc);
    }
  }
}

float swiglu_value(float gate, float up) {
  float s = 1.f / (1.f + std::exp(-gate));
  return gate * s * up;
}

void swiglu_grad(float gate, float up, float* d_gate, float* d_up) {
  float s = 1.f / (1.f + std::exp(-gate));
  *d_gate = up * s * (1.f + gate * (1.f - s));
  *d_up = gate * s;
}

void swiglu_fwd(const uint16_t* fc1_out, int64_t num_rows, int ffn, uint16_t* out) {
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int j = 0; j < ffn; ++j) {
      float g = bf16_to_float(fc1_out[r * 2 * ffn + j]);
      float u = bf16_to_float(fc1_out[r * 2 * ffn + ffn + j]);
      out[r * ffn + j] = float_to_bf16(swiglu_value(g, u));
    }
  }
}

void swiglu_bwd(const uint16_t* fc1_out, const uint16_t* d_out, int64_t num_rows, int ffn,
                uint16_t* d_fc1) {
  for (int64_t r = 0; r < num_rows; ++r) {
    for (int j = 0; j < ffn; ++j) {
      float g = bf16_to_float(fc1_out[r * 2 * ffn + j]);
      float u = bf16_to_float(fc1_out[r * 2 * ffn + ffn + j]);
      float d = bf16_to_float(d_out[r * ffn + j]);
      float d_gate, d_up;
      swiglu_grad(g, u, &d_gate, &d_up);
      d_fc1[r * 2 * ffn + j] = float_to_bf16(d * d_gate);
      d_fc1[r * 2 * ffn + ffn + j] = float_to_bf16(d * d_up);
    }
  }
}

}  // namespace epo::kernels::ref
