// A vector that keeps its first N elements inside itself: shapes (IntList) are short, and every
// traced op made two of them (its node's shape, its tensor's copy of it), each a pooled block
// allocated and later freed. Longer lists spill to a pooled block (ir/pool.h) as std::vector
// would. The interface is the subset of std::vector the code base uses; iterators are pointers,
// so a SmallVec is a contiguous range (std::span takes one).
#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "ir/pool.h"

// GCC 12 reports the members of a SmallVec built inside an aggregate initializer as "maybe used
// uninitialized" where the destructor reads them (they are set by their default initializers).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning and warns of the name
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace lt {

template <class T, std::size_t N>
class SmallVec {
  static_assert(N > 0, "at least one element inline");
  static_assert(std::is_nothrow_move_constructible_v<T>, "elements move without throwing");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVec() noexcept = default;
  explicit SmallVec(size_type n) { resize(n); }
  SmallVec(size_type n, const T& v) { assign(n, v); }
  template <std::input_iterator It>
  SmallVec(It first, It last) {
    assign(first, last);
  }
  SmallVec(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  SmallVec(const SmallVec& o) { *this = o; }  // starts inline: copy-assignment's fixed-size path
  SmallVec(SmallVec&& o) noexcept { steal(o); }
  ~SmallVec() {
    destroy_all();
    release();
  }

  SmallVec& operator=(const SmallVec& o) {
    if (this == &o) return *this;
    if constexpr (std::is_trivially_copyable_v<T>) {
      // A shape copied into its tensor on every traced op: one fixed-size copy of N elements
      // (o's storage holds at least N, inline or spilled), no per-element loop or memcpy call.
      if (o.size_ <= N && is_inline()) {
        std::memcpy(static_cast<void*>(inline_), static_cast<const void*>(o.data_), sizeof inline_);
        size_ = o.size_;
        return *this;
      }
    }
    assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      destroy_all();
      release();
      steal(o);
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>)
      reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }
  void assign(size_type n, const T& v) {
    clear();
    reserve(n);
    for (size_type i = 0; i < n; ++i) emplace_back(v);
  }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return cap_; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }

  T& operator[](size_type i) noexcept { return data_[i]; }
  const T& operator[](size_type i) const noexcept { return data_[i]; }
  T& at(size_type i) {
    if (i >= size_) throw std::out_of_range("SmallVec::at: index out of range");
    return data_[i];
  }
  const T& at(size_type i) const {
    if (i >= size_) throw std::out_of_range("SmallVec::at: index out of range");
    return data_[i];
  }
  T& front() noexcept { return data_[0]; }
  const T& front() const noexcept { return data_[0]; }
  T& back() noexcept { return data_[size_ - 1]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_type n) {
    if (n > cap_) grow_to(n);
  }
  void clear() noexcept { destroy_all(); }

  template <class... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) {
      // Built before the move: `a` may refer to an element of this list.
      T tmp(std::forward<A>(a)...);
      grow_to(cap_ * 2);
      ::new (static_cast<void*>(data_ + size_)) T(std::move(tmp));
    } else {
      ::new (static_cast<void*>(data_ + size_)) T(std::forward<A>(a)...);
    }
    return data_[size_++];
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() noexcept { data_[--size_].~T(); }

  void resize(size_type n) {
    if (n < size_) return shrink(n);
    reserve(n);
    while (size_ < n) ::new (static_cast<void*>(data_ + size_++)) T();
  }
  void resize(size_type n, const T& v) {
    if (n < size_) return shrink(n);
    if (n > cap_) {
      T copy(v);  // `v` may be an element of this list
      grow_to(n);
      while (size_ < n) ::new (static_cast<void*>(data_ + size_++)) T(copy);
      return;
    }
    while (size_ < n) ::new (static_cast<void*>(data_ + size_++)) T(v);
  }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_type{1}, v); }
  iterator insert(const_iterator pos, T&& v) {
    const size_type at = index_of(pos);
    emplace_back(std::move(v));
    std::rotate(data_ + at, data_ + size_ - 1, data_ + size_);
    return data_ + at;
  }
  iterator insert(const_iterator pos, size_type n, const T& v) {
    const size_type at = index_of(pos);
    T copy(v);  // `v` may be an element of this list
    reserve(size_ + n);
    for (size_type i = 0; i < n; ++i) emplace_back(copy);
    std::rotate(data_ + at, data_ + size_ - n, data_ + size_);
    return data_ + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_type at = index_of(pos), before = size_;
    for (; first != last; ++first) emplace_back(*first);
    std::rotate(data_ + at, data_ + before, data_ + size_);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) {
    return insert(pos, il.begin(), il.end());
  }

  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_type a = index_of(first), b = index_of(last);
    if (a == b) return data_ + a;
    std::move(data_ + b, data_ + size_, data_ + a);
    shrink(size_ - (b - a));
    return data_ + a;
  }

  void swap(SmallVec& o) noexcept {
    SmallVec t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend auto operator<=>(const SmallVec& a, const SmallVec& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool is_inline() const noexcept { return data_ == inline_data(); }
  T* inline_data() noexcept { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const noexcept { return reinterpret_cast<const T*>(inline_); }
  size_type index_of(const_iterator p) const noexcept { return static_cast<size_type>(p - data_); }

  void shrink(size_type n) noexcept {
    while (size_ > n) data_[--size_].~T();
  }
  void destroy_all() noexcept {
    if constexpr (std::is_trivially_destructible_v<T>)
      size_ = 0;
    else
      shrink(0);
  }
  // Frees a spilled block (the elements are already gone) and goes back to the inline storage.
  void release() noexcept {
    if (!is_inline()) pool::deallocate(data_, cap_ * sizeof(T));
    data_ = inline_data();
    cap_ = N;
  }
  void grow_to(size_type n) {
    n = std::max(n, size_type{2} * N);
    T* fresh = static_cast<T*>(pool::allocate(n * sizeof(T)));
    relocate(data_, size_, fresh);
    if (!is_inline()) pool::deallocate(data_, cap_ * sizeof(T));
    data_ = fresh;
    cap_ = static_cast<uint32_t>(n);
  }
  // Takes o's elements: its block when spilled, else element by element; o is left empty.
  void steal(SmallVec& o) noexcept {
    if (o.is_inline()) {
      if constexpr (std::is_trivially_copyable_v<T>)  // the whole inline array: a fixed-size copy
        std::memcpy(static_cast<void*>(inline_), static_cast<const void*>(o.inline_),
                    sizeof inline_);
      else
        relocate(o.data_, o.size_, data_);
      size_ = o.size_;
    } else {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = o.inline_data();
      o.cap_ = N;
    }
    o.size_ = 0;
  }
  // Moves n elements from `from` to uninitialized `to` and destroys the sources.
  static void relocate(T* from, size_type n, T* to) noexcept {
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (n) std::memcpy(static_cast<void*>(to), static_cast<const void*>(from), n * sizeof(T));
    } else {
      for (size_type i = 0; i < n; ++i) {
        ::new (static_cast<void*>(to + i)) T(std::move(from[i]));
        from[i].~T();
      }
    }
  }

  T* data_ = inline_data();
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  // Zeroed (one small store per list): the fixed-size copies above read all N slots, and a
  // compiler must not see uninitialized bytes copied (gcc 13 rejects it under -Werror).
  alignas(T) unsigned char inline_[N * sizeof(T)] = {};
};

}  // namespace lt

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
