// Replaced as the kernels land.
namespace epo::kernels {}
