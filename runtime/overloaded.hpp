// overloaded{...}: a visitor from lambdas, for std::visit over message bodies.
#pragma once

namespace sluice {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

}  // namespace sluice
