// A cursor over the text of a small hand-parsed format (the .npy header
// dictionary): whitespace, punctuation and words.
#ifndef MEGRT_SRC_TEXTCURSOR_H
#define MEGRT_SRC_TEXTCURSOR_H

#include "Fail.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace megrt {

/// `Derived` provides `[[noreturn]] void error(const std::string &) const`,
/// which says where in which input the text went wrong.
template <typename Derived> class TextCursor {
protected:
  explicit TextCursor(std::string_view text) : text_(text) {}

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c))
      static_cast<const Derived *>(this)->error(concat("expected '", c, "'"));
  }

  bool consumeWord(std::string_view word) {
    skipSpace();
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

} // namespace megrt

#endif // MEGRT_SRC_TEXTCURSOR_H
