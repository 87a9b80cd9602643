#include "nn/encoder.h"

#include "nn/clusterformer.h"
#include "nn/transformer.h"
#include "ops/elementwise.h"

namespace tapestry::nn {

Tensor EncoderOutput::objective(const Tensor& task_loss) const {
  return aux_loss.defined() ? task_loss + aux_loss : task_loss;
}

std::shared_ptr<Encoder> make_encoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen,
                                      const ClusteringLossWeights& weights) {
  if (options.attention.kind().form() == attention::Form::HiddenStates)
    return std::make_shared<ClusterFormerEncoder>(options, num_layers, gen, weights);
  return std::make_shared<TransformerEncoder>(options, num_layers, gen);
}

}  // namespace tapestry::nn
