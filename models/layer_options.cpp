#include "models/layer_options.h"

#include "core/error.h"

namespace tapestry::models {

nn::TransformerLayerOptions layer_options(const char* model, int64_t heads, int64_t head_dim, int64_t ff,
                                          double dropout, const attention::AttentionConfig& attention) {
  TP_CHECK(heads >= 1 && head_dim >= 1 && head_dim <= kMaxModelWidth / heads, model,
           "heads and head_dim must be at least 1 and their product at most 2^20, got ", heads, " and ", head_dim);
  nn::TransformerLayerOptions layer;
  layer.d_model = heads * head_dim;
  layer.heads = heads;
  layer.d_ff = ff;
  layer.dropout = dropout;
  layer.attention = attention;
  return layer;
}

nn::TransformerLayerOptions layer_options(const char* model, const EncoderOptions& encoder) {
  return layer_options(model, encoder.heads, encoder.head_dim, encoder.ff, encoder.dropout, encoder.attention);
}

}  // namespace tapestry::models
