package jsoncheck

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		body string
		want error // nil: accepted
		in   string
	}{
		{"plain object", `{"char":1,"percent":0.5,"title":"红楼梦"}`, nil, ""},
		{"escaped pair", `{"title":"\ud83d\udcd6 book"}`, nil, ""},
		{"escaped backslash before u", `{"title":"a\\ud800"}`, nil, ""},
		{"same key in two objects", `{"a":{"x":1},"b":{"x":2}}`, nil, ""},
		{"same key at two depths", `{"x":{"x":1}}`, nil, ""},
		{"arrays", `{"a":[1,"x",{"k":[true,null]}]}`, nil, ""},
		{"scalar", `"text"`, nil, ""},
		{"U+FFFD itself", `{"t":"\ufffd and ` + "\uFFFD" + `"}`, nil, ""},
		{"duplicate key", `{"char":1,"char":2}`, ErrDuplicateKey, `"char"`},
		{"duplicate key, escaped", `{"char":1,"\u0063har":2}`, ErrDuplicateKey, `"char"`},
		{"duplicate nested key", `{"a":{"k":1,"k":2}}`, ErrDuplicateKey, `"a.k"`},
		{"duplicate key in an array", `[{"k":1},{"k":1,"k":2}]`, ErrDuplicateKey, `"[1].k"`},
		{"invalid UTF-8 value", "{\"title\":\"a\xffb\"}", ErrNotUTF8, "title"},
		{"invalid UTF-8 key", "{\"ti\xfftle\":1}", ErrNotUTF8, "key"},
		{"encoded surrogate bytes", "{\"title\":\"\xed\xa0\x80\"}", ErrNotUTF8, "title"},
		{"lone high surrogate", `{"title":"\ud800"}`, ErrLoneSurrogate, "title"},
		{"lone low surrogate", `{"title":"\udc00x"}`, ErrLoneSurrogate, "title"},
		{"high then not low", `{"title":"\ud800\u0041"}`, ErrLoneSurrogate, "title"},
		{"two highs", `{"title":"\ud800\ud800"}`, ErrLoneSurrogate, "title"},
		{"surrogate in an array", `{"a":["ok","\uDFFF"]}`, ErrLoneSurrogate, "a[1]"},
		{"surrogate in a key", `{"\ud800":1}`, ErrLoneSurrogate, "key"},
		{"two values", `{}{}`, ErrSyntax, ""},
		{"truncated", `{"a":`, ErrSyntax, ""},
		{"empty", ``, ErrSyntax, ""},
		{"not JSON", `char=1`, ErrSyntax, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.body), nil)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Check(%s) = %v, want %v", tt.body, err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.in) {
				t.Fatalf("Check(%s) = %v, want it to name %s", tt.body, err, tt.in)
			}
		})
	}
}

// text sees every string value with its path, and not the keys.
func TestCheckTextCallback(t *testing.T) {
	var seen []string
	err := Check([]byte(`{"title":"t","n":1,"a":["x",{"k":"v"}],"o":{"deep":"d"}}`), func(path, s string) error {
		seen = append(seen, path+"="+s)
		return nil
	})
	if got, want := strings.Join(seen, " "), "title=t a[0]=x a[1].k=v o.deep=d"; err != nil || got != want {
		t.Fatalf("text saw %q, %v; want %q", got, err, want)
	}
	stop := errors.New("refused")
	err = Check([]byte(`{"a":"x","b":"y"}`), func(path, s string) error {
		if path == "b" {
			return fmt.Errorf("%s: %w", path, stop)
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Check with a refusing callback = %v, want its error", err)
	}
}
