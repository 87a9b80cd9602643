// Saving a model's state and loading it into a fresh model: Module::state_dict() into a Checkpoint
// (core/checkpoint.h) with some metadata, save_checkpoint (atomic), load_checkpoint, and
// load_state_dict into a model built from a different seed. Exits 1 unless the loaded model
// computes exactly what the saved one did, and a checkpoint of the wrong shape is refused.
#include <cstdio>
#include <string>

#include <tapestry/tapestry.h>

using namespace tapestry;

namespace {

// A two-layer network; `hidden` is its width, recorded in the checkpoint's metadata.
class Net : public nn::Module {
 public:
  Net(int64_t hidden, Generator& gen)
      : Module("Net"),
        first_(register_module("first", std::make_shared<nn::Linear>(8, hidden, gen))),
        second_(register_module("second", std::make_shared<nn::Linear>(hidden, 2, gen))) {}
  Tensor forward(const Tensor& x) { return second_->forward(tanh(first_->forward(x))); }

 private:
  std::shared_ptr<nn::Linear> first_, second_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "example.ckpt";
  Generator gen(11);
  const Tensor x = randn({5, 8}, gen);

  // Train a few steps so that the state is not the initial one.
  Net model(16, gen);
  optim::SGD sgd(model.parameters(), {/*lr=*/0.1});
  for (int step = 0; step < 20; ++step) {
    const Tensor loss = mean(mul(model.forward(x), model.forward(x)));
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  }

  Checkpoint checkpoint;
  add_tensors(checkpoint, "model.", model.state_dict());
  checkpoint.metadata["hidden"] = 16;
  save_checkpoint(path, checkpoint);

  // Elsewhere (another process, another day): rebuild the model from the metadata, load the state.
  const Checkpoint loaded = load_checkpoint(path);
  Generator other(99);
  Net restored(loaded.metadata.at("hidden").get<int64_t>(), other);
  restored.load_state_dict(tensors_with_prefix(loaded, "model."));

  NoGradGuard no_grad;
  const std::vector<float> before = model.forward(x).to_vector<float>();
  const std::vector<float> after = restored.forward(x).to_vector<float>();
  const bool same = before == after;
  std::printf("%zu tensors saved to %s; the loaded model's outputs are %s\n", checkpoint.tensors.size(),
              path.c_str(), same ? "identical" : "DIFFERENT");

  // A state of another shape is refused with a message that lists the mismatches.
  bool refused = false;
  try {
    Net wider(32, other);
    wider.load_state_dict(tensors_with_prefix(loaded, "model."));
  } catch (const Error& e) {
    refused = true;
    std::printf("loading into a wider model: %s\n", e.what());
  }
  return same && refused ? 0 : 1;
}
