// Replaced as the executor lands.
namespace epo::exec {}
