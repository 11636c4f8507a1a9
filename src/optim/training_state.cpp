#include "zc/training_state.h"

#include <filesystem>
#include <map>

#include "zc/error.h"
#include "zc/factories.h"
#include "zc/serialize.h"

namespace zc {

namespace {

std::string file(const std::string& dir, const char* name) {
  return (std::filesystem::path(dir) / name).string();
}

constexpr const char* kRng = "rng";
constexpr const char* kSchedule = "schedule.";

}  // namespace

void save_training_state(const std::string& dir, const nn::Module& model,
                         const optim::Optimizer& optimizer, const optim::LRScheduler* schedule) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("zc::save_training_state: cannot create " + dir + ": " + ec.message());
  nn::save_safetensors(model, file(dir, "model.safetensors"));
  optimizer.save(file(dir, "optimizer.safetensors"));
  std::map<std::string, Tensor> trainer{{kRng, rng_state()}};
  if (schedule) {
    for (const auto& [name, value] : schedule->state())
      trainer[kSchedule + name] = scalar_tensor(value, DType::f64);
  }
  write_safetensors(trainer, file(dir, "trainer.safetensors"));
}

void load_training_state(const std::string& dir, nn::Module& model, optim::Optimizer& optimizer,
                         optim::LRScheduler* schedule) {
  for (const char* name : {"model.safetensors", "optimizer.safetensors", "trainer.safetensors"}) {
    if (!std::filesystem::exists(file(dir, name)))
      throw Error("zc::load_training_state: " + file(dir, name) + " does not exist");
  }
  const std::map<std::string, Tensor> trainer = read_safetensors(file(dir, "trainer.safetensors"));
  std::map<std::string, double> schedule_state;
  for (const auto& [name, value] : trainer) {
    if (name.rfind(kSchedule, 0) == 0)
      schedule_state[name.substr(std::string(kSchedule).size())] = value.item<double>();
  }
  if (schedule_state.empty() != (schedule == nullptr)) {
    throw Error("zc::load_training_state: " + dir +
                (schedule ? " holds no learning-rate schedule, and one was given"
                          : " holds a learning-rate schedule's state, and none was given"));
  }
  auto rng = trainer.find(kRng);
  if (rng == trainer.end()) throw Error("zc::load_training_state: " + dir + " holds no rng state");
  nn::load_safetensors(model, file(dir, "model.safetensors"), /*strict=*/true);
  optimizer.load(file(dir, "optimizer.safetensors"));
  if (schedule) schedule->load_state(schedule_state);
  set_rng_state(rng->second);
}

}  // namespace zc
