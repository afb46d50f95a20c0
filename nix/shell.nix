# A development shell with what `make setup` expects on the machine:
# Python 3.11, uv and Go. `nix-shell nix/shell.nix`, then `make test`.
{ pkgs ? import <nixpkgs> { } }:
pkgs.mkShell {
  packages = [
    pkgs.python311
    pkgs.uv
    pkgs.go
    pkgs.gnumake
    pkgs.git
  ];
  # uv must use this Python; it cannot download one offline.
  UV_PYTHON = "${pkgs.python311}/bin/python3.11";
  UV_PYTHON_DOWNLOADS = "never";
}
